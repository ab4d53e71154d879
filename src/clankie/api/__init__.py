"""The HTTP dispatcher: `POST /v1/ops/{op}` onto the service, errors as RFC 9457 problems."""

from .app import MAX_BODY_BYTES, create_app

__all__ = ["MAX_BODY_BYTES", "create_app"]
