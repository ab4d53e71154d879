"""A child process for the crash-safety test: accepts answers in a loop until it is killed.

It starts like `clankie serve` would (start-up recovery first), then repeats: an owner
message, its turn run asks a question, the question is read and answered, the
continuation runs. It prints `accepted REQUEST RECEIPT RUN` only after `input_answer`
returned, and appends `start RUN` to the execution log (fsync'd) each time a run starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from clankie.core.model import RunStatus
from clankie.service import Service
from clankie.settings import Settings
from clankie.store import Store

CHOICE = {"kind": "choice", "prompt": "Tabs or spaces?",
          "options": [{"label": "tabs"}, {"label": "spaces"}]}


def main(db: str, conversation_id: str, token: str, log_path: str) -> None:
    service = Service(Store(db), Settings.model_construct(  # beyond the bounds a user may set:
        receipt_limit=100_000, event_retention=100_000))  # every receipt and event is kept
    service.runs.recover()
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def started(run_id: str) -> None:
        os.write(log, f"start {run_id}\n".encode())
        os.fsync(log)

    print("ready", flush=True)
    while True:
        one_round(service, token, conversation_id, started,
                  lambda line: print(line, flush=True))


def one_round(service: Service, token: str, conversation_id: str,
              started: Callable[[str], None], say: Callable[[str], None]) -> None:
    """A message, its turn asks, the question is answered, the continuation runs; says
    `sent ...` and `accepted ...` only after each returned."""
    sent = service.call("conversation_send", token,
                        {"conversation_id": conversation_id, "text": "next"})
    say(f"sent {conversation_id} {sent.message_id}")  # type: ignore[attr-defined]
    turn = service.runs.claim_next_run(conversation_id)
    assert turn is not None and turn.run_id == sent.run_id  # type: ignore[attr-defined]
    started(turn.run_id)
    asked = service.runs.ask_question(turn.run_id, CHOICE)
    service.runs.finish_run(turn.run_id, RunStatus.SUCCEEDED)
    snap = service.call("input_get", token, {"conversation_id": conversation_id})
    reply = service.call("input_answer", token, {
        "conversation_id": conversation_id, "request_id": asked.request_id,
        "incarnation": snap.incarnation, "revision": snap.revision,  # type: ignore[attr-defined]
        "option_id": snap.pending.options[1].option_id})  # type: ignore[attr-defined]
    receipt = reply.receipt  # type: ignore[attr-defined]
    say(f"accepted {asked.request_id} {receipt.receipt_id} {receipt.run_id}")
    continuation = service.runs.claim_next_run(conversation_id)
    assert continuation is not None and continuation.run_id == receipt.run_id
    started(continuation.run_id)
    service.runs.finish_run(continuation.run_id, RunStatus.SUCCEEDED)


if __name__ == "__main__":
    main(*sys.argv[1:5])  # the loop ends only by SIGKILL
