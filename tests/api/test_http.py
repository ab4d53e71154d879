"""The HTTP edge: problem documents, the body limit, raw bad input, OpenAPI (SPEC section 10)."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from clankie import dto
from clankie.api.app import MAX_BODY_BYTES, create_app
from tests.api.conftest import Http
from tests.world import World


def asked(http: Http) -> tuple[str, dict]:
    c = http.world.conversation()
    return c, http.world.ask(c)


def answer_body(c: str, snap: dict) -> dict:
    q = snap["pending"]
    return {"conversation_id": c, "request_id": q["request_id"],
            "incarnation": snap["incarnation"], "revision": snap["revision"],
            "option_id": q["options"][0]["option_id"]}


def test_success_is_200_json_of_the_output_shape(http: Http):
    c, snap = asked(http)
    response = http.post("input_answer", answer_body(c, snap))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    dto.AnswerReply.model_validate(response.json())


def test_refusals_are_problem_documents_with_the_spec_code_and_extras(http: Http):
    c, snap = asked(http)
    stale = answer_body(c, snap) | {"revision": snap["revision"] - 1}
    response = http.post("input_answer", stale)
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body == {"type": "urn:clankie:problem:stale_revision", "title": "stale revision",
                    "status": 409, "code": "stale_revision", "detail": body["detail"],
                    "incarnation": snap["incarnation"], "revision": snap["revision"]}
    http.post("input_answer", answer_body(c, snap))
    other = answer_body(c, snap) | {"option_id": snap["pending"]["options"][1]["option_id"]}
    closed = http.post("input_answer", other).json()
    assert closed["code"] == "already_answered" and closed["receipt"]["outcome"] == "answered"


def test_unauthenticated_carries_www_authenticate(http: Http):
    response = http.post("conversation_list", {}, token=None)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    for header in ("Basic abc", "Bearer", "Bearer    ", "bearer wrong"):
        response = http.post("conversation_list", {}, token=None,
                             headers={"Authorization": header})
        assert response.json()["code"] == "unauthenticated"


BIG = b'{"conversation_id": "' + b"x" * MAX_BODY_BYTES + b'"}'
RAW_BAD = {
    "invalid utf-8": (b'{"text": "\xff\xfe"}', 422, "invalid_request"),
    "not json": (b"yes", 422, "invalid_request"),
    "truncated json": (b'{"conversation_id": ', 422, "invalid_request"),
    "NaN": (b'{"revision": NaN}', 422, "invalid_request"),
    "deep nesting": (b"[" * 30_000 + b"]" * 30_000, 422, "invalid_request"),
    "array body": (b"[]", 422, "invalid_request"),
    "escaped NUL": (b'{"text": "a\\u0000b"}', 422, "invalid_request"),
    "escaped lone surrogate": (b'{"text": "a\\ud800b"}', 422, "invalid_request"),
    "oversize": (BIG, 413, "payload_too_large"),
}


@pytest.mark.parametrize("name", sorted(RAW_BAD))
def test_raw_bad_bodies_are_refused_and_change_nothing(http: Http, name: str):
    c, snap = asked(http)
    raw, status, code = RAW_BAD[name]
    if name in ("escaped NUL", "escaped lone surrogate"):
        body = json.dumps({k: v for k, v in answer_body(c, snap).items() if k != "option_id"})
        raw = body[:-1].encode() + b', ' + raw[1:]
    before = http.world.dump()
    response = http.post("input_answer", raw=raw, headers={"Content-Type": "application/json"})
    assert (response.status_code, response.json()["code"]) == (status, code)
    assert http.world.dump() == before


def test_oversize_body_without_content_length_is_refused_while_reading(http: Http):
    def chunks():
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b" " * 1024

    response = http.client.post("/v1/ops/conversation_list", content=chunks(),
                                headers={"Authorization": f"Bearer {http.world.operator}"})
    assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")


def test_a_lying_content_length_is_refused(http: Http):
    response = http.post("conversation_list", raw=b"{}", headers={"Content-Length": "abc"})
    assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")


def test_empty_body_means_no_arguments(http: Http):
    response = http.post("conversation_list", raw=b"")
    assert response.status_code == 200
    assert response.json() == {"conversations": [], "next_after": None}


def test_unknown_op_and_paths_are_problems(http: Http):
    response = http.post("input_approve", {})
    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    response = http.client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    response = http.client.get("/v1/ops/input_get")
    assert response.status_code == 405 and response.json()["code"] == "invalid_request"


def test_an_unexpected_error_is_a_500_problem_without_internals(world: World, caplog):
    class Exploding:
        ops = dto.OPS  # the op table it serves, as a service's

        def known_token(self, token):
            return True

        def call_soon(self, op, token, payload, done):
            return False  # read: run in a thread by `call`

        def call(self, op, token, payload):
            raise RuntimeError("secret detail at /srv/clankie/internal.py")

    with TestClient(create_app(Exploding())) as client:  # type: ignore[arg-type]
        response = client.post("/v1/ops/conversation_list", json={},
                               headers={"Authorization": "Bearer any"})
    assert response.status_code == 500
    body = response.text
    assert response.json()["code"] == "internal_error"
    assert "secret" not in body and "Traceback" not in body and "/srv" not in body
    assert "secret detail" in caplog.text  # logged for the owner, not shown to the client


def test_openapi_names_every_op_with_strict_schemas(http: Http):
    document = http.client.get("/v1/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    assert {p.removeprefix("/v1/ops/") for p in document["paths"]} == set(dto.OPS)
    schemas = document["components"]["schemas"]
    assert schemas["InputAnswer"]["additionalProperties"] is False
    answer = document["paths"]["/v1/ops/input_answer"]["post"]
    assert answer["responses"]["409"]["content"]["application/problem+json"]
    assert schemas["InputAnswer"]["properties"]["request_id"]["pattern"] == dto.UUID_PATTERN


def test_a2_chat_room_and_pane_text_over_http_never_answer(http: Http):
    c, snap = asked(http)
    room = http.world.conversation("room")
    for text in ("yes", "1", "/question answer 1"):
        assert http.post("conversation_send", {"conversation_id": c, "text": text}
                         ).status_code == 200
        assert http.post("room_post", {"conversation_id": room, "text": text}).status_code == 200
        assert http.post("pane_metadata_set", {"conversation_id": c, "key": "answer",
                                               "value": text}).status_code == 200
    assert http.world.snapshot(c)["pending"]["request_id"] == snap["pending"]["request_id"]
    with http.world.db() as db:
        assert db.execute("SELECT count(*) FROM runs WHERE kind = 'continuation'"
                          ).fetchone() == (0,)


@pytest.mark.parametrize("raw", [b"{not json", b"\xff\xfe", b"[1, 2]", b'{"limit": "x"}',
                                 b"x" * (MAX_BODY_BYTES + 10), b'{"a": NaN}'])
@pytest.mark.parametrize("token", [None, "not-a-token"])
def test_t6_without_a_valid_token_the_body_is_never_parsed(http: Http, raw: bytes,
                                                           token: str | None):
    for op in ("conversation_list", "input_answer", "no_such_op"):
        response = http.post(op, raw=raw, token=token)
        assert response.status_code == 401, (op, response.text)
        assert response.json()["code"] == "unauthenticated"
