"""Errors as RFC 9457 problem documents: the one mapping from `ClankieError` to HTTP.

Owns the document's shape (`type`, `title`, `status`, `detail`, `code` and the error's
extras); each code's status is `core.vocabulary`'s. Nothing else builds error responses; no
traceback or internal path is ever put in one.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from clankie.core.errors import ClankieError
from clankie.core.vocabulary import Code

MEDIA_TYPE = "application/problem+json"


def problem_body(err: ClankieError, status: int | None = None) -> dict[str, Any]:
    status = status or err.status
    return {
        **err.extra,
        "type": f"urn:clankie:problem:{err.code}",
        "title": err.code.replace("_", " "),
        "status": status,
        "detail": err.detail,
        "code": err.code,
    }


def problem(err: ClankieError, status: int | None = None) -> JSONResponse:
    headers = ({"WWW-Authenticate": 'Bearer realm="clankie"'}
               if err.code is Code.UNAUTHENTICATED else None)
    return JSONResponse(problem_body(err, status), status_code=status or err.status,
                        media_type=MEDIA_TYPE, headers=headers)
