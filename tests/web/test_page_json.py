"""Issue 42, SPEC H5 and section 10 "Dispatcher": what the page's JSON tells a program, beside
its words. Every refusal carries the API's problem document (`type`, `title`, `status`,
`detail`, `code` and its extras), so already-answered, closed, expired and stale are told
apart without reading English; an accepted answer or cancel carries its receipt and
`duplicate`, and Take Control its lease; the question's binding (incarnation, revision,
option IDs) is data at `GET /api/question`, with both halves of the browser's credential
(H3). On the page's own app over a real service and store, through its HTTP routes."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from tests.web.test_h4_http import (
    LISTENER,
    asked,
    binding,
    csrf_in,
    page_client,
    paired,
    still_pending,
)
from tests.world import World

PROBLEM = ("type", "title", "status", "detail", "code")


def headers(key: str) -> dict[str, str]:
    return {"Origin": LISTENER, "X-Clankie-Key": key}


def problem(reply: Any, code: str, status: int, outcome: str) -> dict[str, Any]:
    """A page reply that is the API's problem document for `code`, with the page's words."""
    body = reply.json()
    assert reply.status_code == status, body
    assert set(PROBLEM) <= set(body), body
    assert (body["code"], body["status"], body["type"]) == (
        code, status, f"urn:clankie:problem:{code}"), body
    assert body["outcome"] == outcome and body["message"], body
    return dict(body)


def controlling(world: World, client: TestClient) -> dict[str, str]:
    key = paired(world, client)
    taken = client.post("/api/take-control", json={}, headers=headers(key))
    assert taken.status_code == 200
    return headers(key)


def test_issue42_h5_an_accepted_answer_carries_its_receipt_a_repeat_the_same_one(world: World):
    c, _ = asked(world)
    with page_client(world) as client:
        sent = controlling(world, client)
        body = binding(c, world)
        accepted = client.post("/api/answer", json=body, headers=sent).json()
        again = client.post("/api/answer", json=body, headers=sent).json()
    assert (accepted["outcome"], accepted["duplicate"]) == ("accepted", False)
    receipt = accepted["receipt"]
    assert receipt["outcome"] == "answered" and receipt["request_id"] == body["request_id"]
    assert receipt["answer"]["option_id"] == body["option_id"]
    assert receipt["answered_by"]["kind"] == "device"
    stored = world.snapshot(c, body["request_id"])["request"]["receipt"]
    assert receipt["receipt_id"] == stored["receipt_id"]  # its continuation moves on
    assert (again["outcome"], again["duplicate"]) == ("duplicate", True)
    assert again["receipt"]["receipt_id"] == receipt["receipt_id"]


def test_issue42_h5_a_cancel_carries_its_receipt_and_take_control_its_lease(world: World):
    c, _ = asked(world)
    with page_client(world) as client:
        key = paired(world, client)
        taken = client.post("/api/take-control", json={}, headers=headers(key)).json()
        body = {k: v for k, v in binding(c, world).items() if k != "option_id"}
        cancelled = client.post("/api/cancel", json=body, headers=headers(key)).json()
    assert taken["outcome"] == "control" and taken["lease_id"] and taken["expires_at"]
    assert (cancelled["outcome"], cancelled["duplicate"]) == ("accepted", False)
    assert cancelled["receipt"]["outcome"] == "cancelled"
    assert cancelled["receipt"]["reason"] == "explicit"


def test_issue42_h5_each_ended_refusal_carries_its_own_code_and_the_receipt(world: World):
    """One outcome, "ended", in words; in data, `already_answered` and `request_closed`
    (and the code of whatever else the page found ended), each with how it ended."""
    c, _ = asked(world)
    with page_client(world) as client:
        sent = controlling(world, client)
        first = binding(c, world)
        assert client.post("/api/answer", json=first, headers=sent).status_code == 200
        other = dict(first, option_id=world.snapshot(c, first["request_id"])["request"][
            "options"][1]["option_id"])
        answered = problem(client.post("/api/answer", json=other, headers=sent),
                           "already_answered", 409, "ended")
        world.ask(c)
        pending = binding(c, world)
        world.cancel(c, world.snapshot(c))
        closed = problem(client.post("/api/answer", json=pending, headers=sent),
                         "request_closed", 409, "ended")
    receipt = world.snapshot(c, first["request_id"])["request"]["receipt"]
    assert answered["receipt"]["receipt_id"] == receipt["receipt_id"]
    assert answered["receipt"]["answer"] == {"option_id": first["option_id"]}
    assert closed["receipt"]["outcome"] == "cancelled"
    assert closed["receipt"]["request_id"] == pending["request_id"]


def test_issue42_h5_conflict_expired_forbidden_and_invalid_carry_the_apis_problem(
        world: World):
    c, _ = asked(world)
    with page_client(world) as client:
        key = paired(world, client)
        body = binding(c, world)
        lease = problem(client.post("/api/answer", json=body, headers=headers(key)),
                        "forbidden", 403, "refused")
        sent = controlling(world, client)
        conflict = problem(client.post("/api/answer", json=dict(body, revision=body[
            "revision"] + 1), headers=sent), "stale_revision", 409, "conflict")
        invalid = problem(client.post("/api/answer", json=dict(body, colour="red"),
                                      headers=sent), "invalid_request", 422, "invalid")
        world.clock.advance(world.service.settings.question_ttl + 1)
        client.post("/api/take-control", json={}, headers=sent)
        late = problem(client.post("/api/answer", json=body, headers=sent),
                       "request_expired", 409, "expired")
    assert '"Take control" first' in lease["message"]  # the words stay the page's
    assert lease["mode"] == "control"  # what to do next, as data: take control
    assert conflict["revision"] == body["revision"]  # the API's extras: where it is now
    assert invalid["errors"]
    assert late["receipt"]["outcome"] == "expired"


def test_issue42_h3_h5_a_lost_session_is_unauthenticated_on_every_route(world: World):
    c, _ = asked(world)
    with page_client(world) as client:
        key = paired(world, client)
        client.headers["X-Clankie-Key"] = "0" * 64
        for reply in (client.get(f"/view?c={c}"), client.get(f"/api/events?c={c}"),
                      client.get(f"/api/question?c={c}"),
                      client.post("/api/answer", json=binding(c, world),
                                  headers=dict(headers(key), **{"X-Clankie-Key": "0" * 64}))):
            problem(reply, "unauthenticated", 401, "revoked")
    assert still_pending(world, c)


def test_issue42_h2_a_used_pairing_code_is_unauthenticated_in_data_too(world: World):
    with page_client(world) as client:
        code = world.call("device_pair_start", {"name": "phone"})["code"]
        form = {"code": code, "csrf": csrf_in(client.get(f"/pair?code={code}").text)}
        first = client.post("/pair", data=form, headers={"Origin": LISTENER})
        again = client.post("/pair", data=form, headers={"Origin": LISTENER})
    assert first.json()["outcome"] == "paired" and first.json()["credential_id"]
    assert "pairing link" in problem(again, "unauthenticated", 401, "refused")["message"]


def test_issue42_h5_the_binding_is_data_and_a_program_answers_with_it(world: World):
    """`GET /api/question?c=` is `input_get` for this browser: the conversation, its
    incarnation and revision, the pending question with its options' IDs; answering with
    exactly that is accepted. A read-only browser reads it too."""
    c, snap = asked(world)
    with page_client(world) as client:
        sent = controlling(world, client)
        shown = client.get(f"/api/question?c={c}")
        assert shown.status_code == 200, shown.text
        question = shown.json()
        assert question == world.snapshot(c)
        pending = question["pending"]
        assert [o["label"] for o in pending["options"]] == [
            o["label"] for o in snap["pending"]["options"]]
        answer = {"conversation_id": question["conversation_id"],
                  "request_id": pending["request_id"], "incarnation": question["incarnation"],
                  "revision": question["revision"],
                  "option_id": pending["options"][1]["option_id"]}
        accepted = client.post("/api/answer", json=answer, headers=sent).json()
        assert accepted["outcome"] == "accepted", accepted
        one = client.get(f"/api/question?c={c}&r={pending['request_id']}").json()
        assert one["request"]["receipt"]["receipt_id"] == accepted["receipt"]["receipt_id"]
        nothing = problem(client.get("/api/question?c=" + "0" * 8), "invalid_request", 422,
                          "invalid")
    assert nothing["detail"]


def test_issue42_h5_a_read_only_browser_reads_the_binding_and_cannot_answer(world: World):
    c, _ = asked(world)
    with page_client(world) as client:
        key = paired(world, client, mode="read_only")
        question = client.get(f"/api/question?c={c}").json()
        assert question["pending"]["request_id"] == world.snapshot(c)["pending"]["request_id"]
        looks = problem(client.post("/api/answer", json=binding(c, world),
                                    headers=headers(key)), "forbidden", 403, "refused")
    assert looks["mode"] == "read_only"  # it can only look: no lease would help
    assert still_pending(world, c)
