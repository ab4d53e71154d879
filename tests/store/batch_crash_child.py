"""A child process for the batched-commit crash test: six threads, each with its own
conversation, send messages and accept answers at once until the process is killed.

It prints `sent CONVERSATION MESSAGE` and `accepted REQUEST RECEIPT RUN` only after the
operation returned (durable by then), and `batched OPERATIONS COMMITS` now and then, so
the test can see that operations really shared commits.
"""

from __future__ import annotations

import sys
import threading

from clankie.core.model import RunStatus
from clankie.service import Service
from clankie.settings import Settings
from clankie.store import Store

CHOICE = {"kind": "choice", "prompt": "Tabs or spaces?",
          "options": [{"label": "tabs"}, {"label": "spaces"}]}
_print = threading.Lock()


def say(line: str) -> None:
    with _print:
        print(line, flush=True)


def loop(service: Service, token: str, conversation_id: str) -> None:
    while True:
        sent = service.call("conversation_send", token,
                            {"conversation_id": conversation_id, "text": "next"})
        say(f"sent {conversation_id} {sent.message_id}")  # type: ignore[attr-defined]
        turn = service.claim_next_run(conversation_id)
        assert turn is not None
        asked = service.ask_question(turn.run_id, CHOICE)
        service.finish_run(turn.run_id, RunStatus.SUCCEEDED)
        snap = service.call("input_get", token, {"conversation_id": conversation_id})
        reply = service.call("input_answer", token, {
            "conversation_id": conversation_id, "request_id": asked.request_id,
            "incarnation": snap.incarnation, "revision": snap.revision,  # type: ignore[attr-defined]
            "option_id": snap.pending.options[0].option_id})  # type: ignore[attr-defined]
        receipt = reply.receipt  # type: ignore[attr-defined]
        say(f"accepted {asked.request_id} {receipt.receipt_id} {receipt.run_id}")
        continuation = service.claim_next_run(conversation_id)
        assert continuation is not None
        service.finish_run(continuation.run_id, RunStatus.SUCCEEDED)
        say(f"batched {service.store.operations} {service.store.commits}")


def main(db: str, token: str, *conversations: str) -> None:
    service = Service(Store(db), Settings(receipt_limit=100_000, event_retention=100_000))
    service.recover()
    say("ready")
    for c in conversations:
        threading.Thread(target=loop, args=(service, token, c), daemon=True).start()
    threading.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *sys.argv[3:])
