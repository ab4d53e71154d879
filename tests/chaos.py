"""A kill campaign from the outside: a real `clankie serve`, a client ledger, SIGKILL at random
moments, and after every restart a check made from the API alone.

Between kills, one client acts at random on six conversations as a user's scripts would:
operator option answers, text answers, a Take Control device answering, identical
duplicates, cancels, resets, a native takeover, messages (each message's turn asks), and
answers to requests whose receipts were evicted (default `receipt_limit`). Questions
expire after a second: every sixth round lasts long enough that one question, left alone,
expires: answered from a snapshot read before it expired, it is `request_expired` (A7);
read, it has expired; answered again, `request_closed` (A5). (Turns queued there before it
was left alone may still run after the snapshot: then the first answer is `stale_revision`
(A6) and the question, read again, has expired; or a turn asking after the TTL ended it
`expired` and the first answer is `request_closed`.) After every restart it
verifies:

- every acknowledged answer is there: its receipt names the same run (or the receipt was
  evicted: then the run itself still carries the receipt), and answering it again
  identically is a duplicate with the same receipt and run;
- no run is queued or running from before the restart, and no run's start ever changes
  (none executed twice); an evicted request starts nothing;
- no reply was a 5xx; every answer whose reply never came resolves by reading it.

    python -m tests.chaos [--kills 500] [--seed N]    (prints a JSON summary)
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clankie import dto
from clankie.client import ApiError, Client, ServiceUnreachable, Uncertain
from tests.e2e.served import Served

ASK = {"kind": "choice", "prompt": "Tabs or spaces?", "allow_text": True,
       "options": [{"label": "tabs"}, {"label": "spaces"}]}
SCRIPT = {"turns": [[{"ask": ASK}]] * 5_000}
ENV = {"CLANKIE_QUESTION_TTL": "1"}
READ_S, HOLD_S = 0.3, 1.4  # a held question is read, then answered, this long after it
# was first seen pending (its TTL is 1 s)
LONG_ROUND = 6  # every sixth round is long enough for that


@dataclass
class Ack:
    conversation_id: str
    request_id: str
    receipt_id: str
    run_id: str | None
    payload: dict[str, Any]
    token: str


@dataclass
class Held:
    """A pending question the campaign leaves alone until it has expired."""

    conversation_id: str
    request_id: str
    seen: float  # monotonic
    snapshot: dict[str, Any] | None = None  # read before it expired


@dataclass
class Ledger:
    acks: dict[str, Ack] = field(default_factory=dict)  # by request
    evicted: list[Ack] = field(default_factory=list)  # acknowledged, receipt since evicted
    uncertain: list[tuple[str, str, str]] = field(default_factory=list)  # conv, request, token
    starts: dict[str, str | None] = field(default_factory=dict)  # run -> started_at
    errors: list[str] = field(default_factory=list)  # what must never happen
    counts: Counter[str] = field(default_factory=Counter)


class Campaign:
    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.ledger = Ledger()
        self.served = Served.start(root / "home", script=SCRIPT, env=ENV)
        with self.served.client() as client:
            self.conversations = []
            for n in range(6):
                workspace = root / f"ws{n}"
                workspace.mkdir()
                self.conversations.append(str(client.op(dto.CONVERSATION_CREATE,
                                                        dto.ConversationCreate(workspace=str(workspace))).conversation_id))
            self.device = client.op(dto.DEVICE_PAIR,
                                    dto.DevicePair(name="phone", mode="control")).token
        self.operator = self.served.home.token_file.read_text().strip()
        self.held: Held | None = None  # a question left alone to expire
        self._lease()

    def _lease(self) -> None:
        with self.served.client(self.device) as device:
            device.op(dto.DEVICE_TAKE_CONTROL, dto.DeviceTakeControl(ttl_s=3_600))

    # -------------------------------------------------------------------------- acting

    def act_until_killed(self, deadline: float) -> None:
        with self.served.client() as client:
            while time.monotonic() < deadline:
                try:
                    self._act(client)
                except (ServiceUnreachable, Uncertain):
                    return  # killed

    def _act(self, client: Client) -> None:
        held = self.held
        if held is not None and held.snapshot is None and time.monotonic() > held.seen + READ_S:
            self._read_held(client, held)
            return
        if held is not None and time.monotonic() > held.seen + HOLD_S:
            self._answer_expired(client, held)
            return
        c = self.rng.choice([c for c in (self.conversations[:-1] if self.rng.random() < 0.98
                                         else self.conversations)
                             if held is None or c != held.conversation_id])
        snap = client.call("input_get", {"conversation_id": c})
        pending = snap["pending"]
        if pending is not None and held is None:
            self.held = Held(c, pending["request_id"], time.monotonic())
            return
        roll = self.rng.random()
        if pending is None or roll < 0.1:
            self._call(client, "conversation_send", {"conversation_id": c, "text": "go on"})
            return
        base = {"conversation_id": c, "request_id": pending["request_id"],
                "incarnation": snap["incarnation"], "revision": snap["revision"]}
        if roll < 0.45:
            self._answer(base | {"option_id": self.rng.choice(pending["options"])["option_id"]},
                         self.operator)
        elif roll < 0.6:
            self._answer(base | {"text": self.rng.choice(["tabs, please", "spaces"])},
                         self.operator)
        elif roll < 0.72:
            self._answer(base | {"option_id": pending["options"][0]["option_id"]}, self.device)
        elif roll < 0.8:
            self._call(client, "input_cancel", base)
        elif roll < 0.87 and self.ledger.acks:
            self._duplicate(self.rng.choice(list(self.ledger.acks.values())))
        elif roll < 0.93:
            self._call(client, "conversation_reset", {"conversation_id": c})
        elif roll < 0.935 and c == self.conversations[-1]:
            self._call(client, "native_takeover", {"conversation_id": c, "seat": "tmux:1"})
        else:
            self._evicted_answer(client)

    def _read_held(self, client: Client, held: Held) -> None:
        """The snapshot a user reads before the question expires, and answers too late."""
        snap = client.call("input_get", {"conversation_id": held.conversation_id})
        if snap["pending"] is None or snap["pending"]["request_id"] != held.request_id:
            self.held = None  # it was asked long before it was seen: expired already
            self.ledger.counts["expired:before the read"] += 1
            return
        held.snapshot = snap

    def _answer_expired(self, client: Client, held: Held) -> None:
        """Past its TTL, untouched: answered from the earlier snapshot it is
        `request_expired` (A7, which commits the expiry); read, it has expired; answered
        again, `request_closed` (A5). Nothing else is right, but for what the campaign did
        before it held the question: turns queued by messages sent to that conversation
        earlier still run after the snapshot, one at a time (R4). Each changes status twice,
        and that moves the revision (section 2): the answer is `stale_revision` (A6, checked
        before A7), so the campaign reads again, as A6 says, and that read, past the TTL,
        commits the expiry (S5). Or one of them asks after the TTL: that use ends the
        question `expired` (section 6) and asks anew, so the answer is `request_closed`
        (A5). Either way the question then reads as expired and an answer is
        `request_closed`."""
        self.held = None
        assert held.snapshot is not None
        q = held.snapshot["pending"]
        payload = {"conversation_id": held.conversation_id, "request_id": held.request_id,
                   "incarnation": held.snapshot["incarnation"],
                   "revision": held.snapshot["revision"],
                   "option_id": q["options"][0]["option_id"]}
        first = True
        for expected in ("request_expired", "request_closed"):
            try:
                client.call("input_answer", payload)
                self.ledger.errors.append("an expired question took an answer")
                return
            except ApiError as exc:
                self.ledger.counts[f"expired:{exc.code}"] += 1
                if first and not self._moved_on(held, exc):
                    return
                if not first and exc.code != expected:
                    self.ledger.errors.append(f"answering an expired question gave "
                                              f"{exc.code}, not {expected}")
                    return
            first = False
            snap = client.call("input_get", {"conversation_id": held.conversation_id,
                                             "request_id": held.request_id})
            if snap["request"]["status"] != "expired":
                self.ledger.errors.append(f"an expired question reads as "
                                          f"{snap['request']['status']}")
            payload |= {"revision": snap["revision"]}

    def _moved_on(self, held: Held, exc: ApiError) -> bool:
        """Whether the first answer to a held question that expired is right: `request_expired`,
        or, when the conversation moved on after the snapshot (see `_answer_expired`),
        `stale_revision` carrying a newer revision, or `request_closed` carrying its
        `expired` receipt. Records anything else as an error."""
        assert held.snapshot is not None
        if exc.code == "request_expired":
            return True
        if exc.code == "stale_revision":
            revision = exc.problem.get("revision")
            if isinstance(revision, int) and revision > held.snapshot["revision"]:
                self.ledger.counts["expired:moved on, read again"] += 1
                return True
            self.ledger.errors.append(f"stale_revision for a question read at revision "
                                      f"{held.snapshot['revision']} carried {revision!r}")
            return False
        if exc.code == "request_closed":
            receipt = exc.problem.get("receipt") or {}
            if receipt.get("outcome") == "expired":
                self.ledger.counts["expired:moved on, ended by a later ask"] += 1
                return True
            self.ledger.errors.append(f"an expired question was closed as "
                                      f"{receipt.get('outcome')!r}")
            return False
        self.ledger.errors.append(f"answering an expired question gave {exc.code}, "
                                  f"not request_expired")
        return False

    def _call(self, client: Client, op: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        try:
            result = client.call(op, payload)
        except ApiError as exc:
            self.ledger.counts[f"{op}:{exc.code}"] += 1
            if exc.status >= 500:
                self.ledger.errors.append(f"{op} gave {exc.status} {exc.code}")
            return None
        self.ledger.counts[f"{op}:ok"] += 1
        return result

    def _answer(self, payload: dict[str, Any], token: str) -> None:
        with self.served.client(token) as client:
            try:
                reply = client.call("input_answer", payload)
            except Uncertain:
                self.ledger.uncertain.append((payload["conversation_id"],
                                              payload["request_id"], token))
                raise
            except ApiError as exc:
                self.ledger.counts[f"input_answer:{exc.code}"] += 1
                if exc.status >= 500:
                    self.ledger.errors.append(f"input_answer gave {exc.status} {exc.code}")
                if exc.code == "forbidden" and token == self.device:
                    self._lease()  # the lease went with a restart's clock? take it again
                return
        receipt = reply["receipt"]
        self.ledger.counts["input_answer:accepted"] += 1
        who = "device" if token == self.device else "text" if "text" in payload else "option"
        self.ledger.counts[f"accepted:{who}"] += 1
        self.ledger.acks[payload["request_id"]] = Ack(
            payload["conversation_id"], payload["request_id"], receipt["receipt_id"],
            receipt["run_id"], payload, token)

    def _duplicate(self, ack: Ack) -> None:
        with self.served.client(ack.token) as client:
            try:
                reply = client.call("input_answer", ack.payload)
            except ApiError as exc:
                if exc.code != "unknown_request":  # evicted: fine; anything else is wrong
                    self.ledger.errors.append(f"a duplicate answer gave {exc.code}")
                self.ledger.counts[f"duplicate:{exc.code}"] += 1
                return
        same = (reply["duplicate"], reply["receipt"]["receipt_id"], reply["receipt"]["run_id"])
        if same != (True, ack.receipt_id, ack.run_id):
            self.ledger.errors.append(f"a duplicate of {ack.request_id} was not the original")
        self.ledger.counts["duplicate:same receipt"] += 1

    def _evicted_answer(self, client: Client) -> None:
        """Answer an acknowledged request again, but differently: one whose receipt was
        evicted must be unknown_request and start nothing; another, already_answered."""
        ack = (self.rng.choice(self.ledger.evicted) if self.ledger.evicted
               else next(iter(self.ledger.acks.values()), None))
        if ack is None:
            return
        other = dict(ack.payload, option_id=None, text="something else")
        other = {k: v for k, v in other.items() if v is not None}
        before = _last_seq(client, ack.conversation_id)
        with self.served.client(ack.token) as answerer:
            try:
                answerer.call("input_answer", other)
                self.ledger.errors.append("a different answer to an answered request was taken")
            except ApiError as exc:
                self.ledger.counts[f"evicted_or_answered:{exc.code}"] += 1
                expected = "unknown_request" if ack in self.ledger.evicted else "already_answered"
                if exc.code == "unknown_request" and expected != exc.code and _evicted(
                        client, ack):  # its receipt was evicted since the last check
                    expected = exc.code
                if exc.code != expected:
                    self.ledger.errors.append(f"a different answer gave {exc.code}, "
                                              f"not {expected}")
                if exc.code == "unknown_request":
                    page = client.call("events_tail", {"conversation_id": ack.conversation_id,
                                                       "after": before})
                    if any(e["type"] == "run_status" and e["status"] == "queued"
                           and e["kind"] == "continuation" for e in page["events"]):
                        self.ledger.errors.append("an evicted request started a run")

    # -------------------------------------------------------------------------- checking

    def verify(self) -> None:
        with self.served.client() as client:
            for ack in list(self.ledger.acks.values()):
                self._verify_ack(client, ack)
            for c, request_id, _ in self.ledger.uncertain:
                try:
                    snap = client.call("input_get", {"conversation_id": c,
                                                     "request_id": request_id})
                    self.ledger.counts[f"uncertain:{snap['request']['status']}"] += 1
                except ApiError as exc:
                    if exc.code != "unknown_request":
                        self.ledger.errors.append(f"an uncertain answer reads as {exc.code}")
                    self.ledger.counts["uncertain:evicted"] += 1
            self.ledger.uncertain.clear()
            for run_id, started in list(self.ledger.starts.items()):
                run = client.call("run_get", {"run_id": run_id})
                if run["status"] in ("queued", "running"):
                    self.ledger.errors.append(f"run {run_id} is {run['status']} after restart")
                if started is not None and run["started_at"] != started:
                    self.ledger.errors.append(f"run {run_id} started twice")
                self.ledger.starts[run_id] = run["started_at"]

    def _verify_ack(self, client: Client, ack: Ack) -> None:
        if ack.run_id is not None:
            run = client.call("run_get", {"run_id": ack.run_id})
            if (run["kind"], run["receipt_id"]) != ("continuation", ack.receipt_id):
                self.ledger.errors.append(f"the run of {ack.request_id} does not carry it")
            self.ledger.starts.setdefault(ack.run_id, run["started_at"])
        try:
            snap = client.call("input_get", {"conversation_id": ack.conversation_id,
                                             "request_id": ack.request_id})
        except ApiError as exc:
            if exc.code != "unknown_request":
                self.ledger.errors.append(f"acknowledged {ack.request_id} reads as {exc.code}")
            del self.ledger.acks[ack.request_id]  # evicted: its run was checked above
            self.ledger.evicted.append(ack)
            self.ledger.counts["acknowledged:evicted"] += 1
            return
        receipt = snap["request"]["receipt"]
        if (receipt["receipt_id"], receipt["run_id"]) != (ack.receipt_id, ack.run_id):
            self.ledger.errors.append(f"acknowledged {ack.request_id} lost its receipt")

    # ----------------------------------------------------------------------------- run

    def kill_and_restart(self) -> None:
        self.served.stop(signal.SIGKILL)
        self.served = Served.start(self.root / "home", init=False, script=SCRIPT, env=ENV)
        self.held = None  # R3 cancelled it
        self._lease()

    def run(self, kills: int) -> dict[str, Any]:
        started = time.monotonic()
        try:
            for round_number in range(1, kills + 1):
                moment = (self.rng.uniform(0.05, 0.6) if round_number % LONG_ROUND
                          else self.rng.uniform(HOLD_S + 0.6, HOLD_S + 1.0))
                killer = threading.Timer(moment, self.served.proc.send_signal,
                                         args=(signal.SIGKILL,))
                killer.start()
                self.act_until_killed(time.monotonic() + moment + 5)
                killer.join()
                self.kill_and_restart()
                self.verify()
        finally:
            self.served.stop()
        return {"kills": kills, "seconds": round(time.monotonic() - started, 1),
                "acknowledged_answers_checked": self.ledger.counts["input_answer:accepted"],
                "runs_checked": len(self.ledger.starts), "errors": self.ledger.errors,
                "counts": dict(sorted(self.ledger.counts.items()))}


def _evicted(client: Client, ack: Ack) -> bool:
    """Whether reading the request says its receipt is gone (evicted)."""
    try:
        client.call("input_get", {"conversation_id": ack.conversation_id,
                                  "request_id": ack.request_id})
    except ApiError as exc:
        return exc.code == "unknown_request"
    return False


def _last_seq(client: Client, conversation_id: str) -> int:
    after = 0
    while True:
        page = client.call("events_tail", {"conversation_id": conversation_id, "after": after,
                                           "limit": 500})
        after = page["next_after"]
        if len(page["events"]) < 500:
            return int(after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=500)
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="clankie-chaos-") as tmp:
        summary = Campaign(Path(tmp), args.seed).run(args.kills)
    print(json.dumps(summary, indent=2))
    raise SystemExit(1 if summary["errors"] else 0)


if __name__ == "__main__":
    main()
