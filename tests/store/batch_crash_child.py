"""A child process for the batched-commit crash test: six threads, each with its own
conversation, send messages and accept answers at once until the process is killed.

It prints `sent CONVERSATION MESSAGE` and `accepted REQUEST RECEIPT RUN` only after the
operation returned (durable by then), and `batched OPERATIONS COMMITS` now and then, so
the test can see that operations really shared commits.
"""

from __future__ import annotations

import sys
import threading

from clankie.service import Service
from clankie.settings import Settings
from clankie.store import Store
from tests.store.crash_child import one_round

_print = threading.Lock()


def say(line: str) -> None:
    with _print:
        print(line, flush=True)


def loop(service: Service, token: str, conversation_id: str) -> None:
    while True:
        one_round(service, token, conversation_id, lambda run_id: None, say)
        say(f"batched {service.store.operations} {service.store.commits}")


def main(db: str, token: str, *conversations: str) -> None:
    service = Service(Store(db), Settings.model_construct(  # beyond the bounds a user may set:
        receipt_limit=100_000, event_retention=100_000))  # every receipt and event is kept
    service.runs.recover()
    say("ready")
    for c in conversations:
        threading.Thread(target=loop, args=(service, token, c), daemon=True).start()
    threading.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *sys.argv[3:])
