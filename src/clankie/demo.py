"""`clankie demo`: the question path shown end to end, in a temporary home, then cleaned up.

Owns only the scenario and its transcript. Until the agent runtime exists it plays
Clankie's part by hand (a turn run that calls `ask_question`), through the same service
operations a real surface uses: ask, read the snapshot, answer, see the continuation
queued, repeat the answer (duplicate), and see a stale answer refused.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from clankie.core.errors import ClankieError
from clankie.core.model import RunStatus
from clankie.service import Service
from clankie.settings import Settings
from clankie.store import Store

QUESTION = {
    "kind": "choice",
    "prompt": "Which test runner should this project use?",
    "options": [
        {"label": "pytest", "description": "plain asserts, fixtures"},
        {"label": "unittest", "description": "standard library only"},
    ],
    "allow_text": True,
}


def run_demo(out: Any = print) -> int:
    with tempfile.TemporaryDirectory(prefix="clankie-demo-") as tmp:
        home = Path(tmp)
        workspace = home / "project"
        workspace.mkdir()
        store = Store(home / "clankie.db")
        try:
            _scenario(Service(store, Settings()), workspace, out)
        finally:
            store.close()
    return 0


def _scenario(service: Service, workspace: Path, out: Any) -> None:
    token = service.init_owner()
    assert token is not None

    def call(op: str, **payload: Any) -> Any:
        return service.call(op, token, payload)

    conversation = call("conversation_create", workspace=str(workspace))
    c = conversation.conversation_id
    out(f"conversation {c} bound to {conversation.workspace.path}")

    sent = call("conversation_send", conversation_id=c, text="Set up tests for this project.")
    out("owner> Set up tests for this project.")
    run = service.claim_next_run(c)
    assert run is not None and run.run_id == sent.run_id
    asked = service.ask_question(run.run_id, QUESTION)
    out(f"clankie asks (tool result: {asked.status}, request {asked.request_id})")
    service.finish_run(run.run_id, RunStatus.SUCCEEDED)

    snapshot = call("input_get", conversation_id=c)
    q = snapshot.pending
    out(f"\n  {q.prompt}")
    for number, option in enumerate(q.options, start=1):
        out(f"   {number}. {option.label}: {option.description}")
    out(f"  (incarnation {snapshot.incarnation}, revision {snapshot.revision}; text allowed)")

    out("\nowner> yes   (ordinary chat: never an answer)")
    call("conversation_send", conversation_id=c, text="yes")
    out(f"  still pending: {call('input_get', conversation_id=c).pending is not None}")

    answer = {"conversation_id": c, "request_id": q.request_id,
              "incarnation": snapshot.incarnation, "revision": snapshot.revision,
              "option_id": q.options[0].option_id}
    try:
        call("input_answer", **answer)
    except ClankieError as err:
        out(f"answer 1 with the displayed revision -> {err.code}: read again and decide")
    fresh = call("input_get", conversation_id=c)
    answer["revision"] = fresh.revision
    reply = call("input_answer", **answer)
    r = reply.receipt
    out(f"answer 1 with revision {fresh.revision} -> accepted: receipt {r.receipt_id}")
    out(f"  continuation run {r.run_id} is {r.continuation} (accepted means stored, "
        "not yet executed)")
    again = call("input_answer", **answer)
    out(f"the same answer again -> duplicate={again.duplicate}, same receipt: "
        f"{again.receipt.receipt_id == r.receipt_id}, same run: {again.receipt.run_id == r.run_id}")
    try:
        call("input_answer", **(answer | {"option_id": q.options[1].option_id}))
    except ClankieError as err:
        out(f"a different answer -> {err.code}")

    recovery = service.recover()
    out(f"\nrestart: {recovery.failed_runs} unfinished run(s) failed, never replayed")
    final = call("input_get", conversation_id=c, request_id=q.request_id).request.receipt
    out(f"receipt now: outcome={final.outcome}, continuation={final.continuation} "
        f"({final.continuation_error})")
