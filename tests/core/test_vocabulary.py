"""One vocabulary (issue 20): SPEC section 10's codes with their HTTP status and exit code in
one table, which the error type, the problem documents and the CLI all read."""

from __future__ import annotations

from clankie.api.problems import problem_body
from clankie.cli import common
from clankie.core import errors, lifecycle
from clankie.core.errors import ClankieError
from clankie.core.vocabulary import CODES, EXIT_OF_CODE, STATUS_OF_CODE, Code, Exit

# SPEC section 10, "Dispatcher" (HTTP) and "CLI" (exit codes), as the SPEC words them.
SPEC_HTTP = {"invalid_request": 422, "payload_too_large": 413, "unauthenticated": 401,
             "forbidden": 403, "not_found": 404, "unknown_request": 404,
             "stale_incarnation": 409, "stale_revision": 409, "already_answered": 409,
             "request_closed": 409, "request_expired": 409, "not_eligible": 409,
             "invalid_answer": 422, "storage_unavailable": 503}
SPEC_EXIT = {"invalid_request": 2, "invalid_answer": 2, "payload_too_large": 2,
             "stale_incarnation": 3, "stale_revision": 3, "already_answered": 4,
             "request_closed": 4, "request_expired": 4, "not_eligible": 4,
             "unauthenticated": 5, "forbidden": 5, "not_found": 6, "unknown_request": 6}
# Codes the SPEC names without a row in its table, given one like their kin
# (docs/decisions.md, issue 31): a conflict that reading again does not lift is refused.
DECIDED = {"question_pending": (409, 4)}


def test_each_code_has_the_http_status_and_exit_code_of_spec_section_10():
    assert {c: STATUS_OF_CODE[c] for c in SPEC_HTTP} == SPEC_HTTP
    assert {c: int(EXIT_OF_CODE[c]) for c in SPEC_EXIT} == SPEC_EXIT
    assert {c: (STATUS_OF_CODE[c], int(EXIT_OF_CODE[c])) for c in DECIDED} == DECIDED
    assert set(CODES) == set(Code)
    # Anything else is exit 1 ("anything else"): the storage and internal errors.
    assert {c for c in Code if c not in SPEC_EXIT | DECIDED} == {
        c for c in Code if EXIT_OF_CODE[c] == 1}


def test_the_error_type_the_problem_document_and_the_cli_read_the_one_table():
    assert errors.STATUS_OF_CODE is STATUS_OF_CODE
    assert common.EXIT_OF_CODE is EXIT_OF_CODE
    assert (common.USAGE, common.UNCERTAIN, common.OTHER) == (Exit.USAGE, Exit.UNCERTAIN, 1)
    for code in Code:
        err = ClankieError(code, "why")
        assert (err.status, problem_body(err)["status"]) == (STATUS_OF_CODE[code],) * 2
        assert ClankieError(code.value, "why").code is code


def test_a_native_takeover_ends_a_question_for_native_takeover_and_refuses_asking_as_native_owned():
    """SPEC section 6 and Q3 name the two reasons differently; each has its own enum."""
    assert lifecycle.Reason.NATIVE_TAKEOVER == "native_takeover"
    assert lifecycle.AskRefusal.NATIVE_OWNED == "native_owned"
