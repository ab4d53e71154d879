"""Bench of the answer path on a real `clankie serve`, next to its floor, in one run.

Every server runs in its own process on a Unix socket; every client is a process of its
own (8 client processes for 8 clients: one Python process of 8 httpx threads is itself
the bottleneck). The floor is `bench/floor_server.py`: the same stack (uvicorn, FastAPI,
strict pydantic, a worker thread, one SQLite `synchronous=FULL` commit, the reply after
the commit) doing nothing else, measured in the same run with the same client. Prints
one JSON document: each figure, its ratio to the floor where one applies, and its target.

- `input_answer`, 1 client and 8 clients; each answer is to its own pending question,
  and each accepted answer's continuation really runs (it replies and asks again); with,
  for each drive, what the server process spent per answer, its continuation included:
  CPU, context switches and fdatasync calls (`perf stat` on the server's PID from the
  drive's start until the server is idle again; without `perf`, CPU and context switches
  from `/proc`), and the same of `clankie serve`'s run process (its child, issue 39), the
  floor's the same way;
- the same accept with no continuation to execute (an agent's question, answered by the
  operator: no run follows, SPEC P3), to tell the accept's own cost from its run's;
- answer sent -> the continuation's `running` event delivered to a waiting `events_tail`:
  on the answering connection after its reply (as the issue measured it), and from a tail
  already waiting in another client process;
- `input_get` with 10 and with 100,000 events in the conversation, and the same call from a
  raw-socket client that costs almost nothing (what the server takes; httpx adds the rest);
- `clankie serve` ready after a kill that left 10,000 pending questions and 10,000
  queued runs;
- `conversation_list` (a page of 100) and a prefix lookup among 50,000 conversations.

    .venv/bin/python bench/accept.py [--accepts 400] [--reads 500] [--quick] [--src OTHER/src]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import platform
import random
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from clankie.client import Client, ClientError
from clankie.core.lifecycle import Change
from clankie.core.model import Author, Message, MessagePosted, iso
from clankie.store import Store

BENCH = Path(__file__).resolve().parent
ASK = {"kind": "choice", "prompt": "Tabs or spaces?",
       "options": [{"label": "tabs"}, {"label": "spaces"}]}
SCRIPT = {"turns": [[{"ask": ASK}], [{"say": "Noted: {answer}."}, {"ask": ASK}]]}


# ------------------------------------------------------------------------- processes


class Server:
    """A server process; its stderr is drained on a thread so it never blocks."""

    def __init__(self, argv: list[str], env: dict[str, str], ready: str,
                 timeout: float = 120) -> None:
        start = time.perf_counter()
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        seen = threading.Event()

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line)
                if ready in line:
                    seen.set()

        threading.Thread(target=drain, daemon=True).start()
        if not seen.wait(timeout):
            self.stop()
            raise RuntimeError("the server did not start:\n" + "".join(self.lines))
        self.ready_s = time.perf_counter() - start

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)


# `--src DIR`: the clankie served (and its run process) comes from DIR, another tree (a
# "before" to compare in the same run); the bench's own client and store code stay this one.
SOURCE: list[str] = []


def clankie_env(home: Path, retention: int = 200_000) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLANKIE_")}
    env.update(CLANKIE_HOME=str(home), CLANKIE_EVENT_RETENTION=str(retention))
    if SOURCE:
        env["PYTHONPATH"] = SOURCE[0]
    return env


def serve(home: Path, script: Path | None = None, retention: int = 200_000) -> Server:
    env = clankie_env(home, retention)
    if not (home / "operator.token").exists():
        subprocess.run([sys.executable, "-m", "clankie", "init"], env=env, check=True,
                       capture_output=True)
    argv = [sys.executable, "-m", "clankie", "serve"]
    if script is not None:
        argv += ["--script", str(script)]
    return Server(argv, env, "clankie serving on")


def operator(home: Path) -> Client:
    return Client(f"unix://{home / 'clankie.sock'}",
                  (home / "operator.token").read_text().strip(), timeout=60)


# --------------------------------------------------------------------------- figures


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(samples: list[float], seconds: float | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"n": len(samples),
                              "p50_ms": round(percentile(samples, 0.50) * 1000, 3),
                              "p99_ms": round(percentile(samples, 0.99) * 1000, 3),
                              "mean_ms": round(statistics.fmean(samples) * 1000, 3)}
    if seconds is not None:
        result["per_second"] = round(len(samples) / seconds, 1)
    return result



class Usage:
    """What a process spends while it is watched: from its making until `figures` (called
    once the server and its run process are idle again, `idle`: the runs finished too).
    Counted by `perf stat` on its PID where `perf` can (CPU, context switches, fdatasync);
    else CPU and context switches from `/proc` (the threads alive at the end; fdatasync
    unknown)."""

    EVENTS = "task-clock,context-switches,syscalls:sys_enter_fdatasync"

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.perf: subprocess.Popen[str] | None = None
        if shutil.which("perf"):
            self.perf = subprocess.Popen(
                ["perf", "stat", "-x,", "-e", self.EVENTS, "-p", str(pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(0.3)  # attached (a bench: no test waits like this)
            if self.perf.poll() is not None:  # not allowed here: /proc only
                self.perf = None
        self.before = self._proc()

    def _proc(self) -> tuple[float, int]:
        """(CPU seconds of the whole process, context switches of its live threads)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        switches = 0
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            with contextlib.suppress(OSError):
                for line in (task / "status").read_text().splitlines():
                    if line.endswith(tuple("0123456789")) and "ctxt_switches" in line:
                        switches += int(line.split()[1])
        return cpu, switches

    def busy_ns(self) -> int:
        total = 0
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                total += int((task / "schedstat").read_text().split()[0])
        return total

    def figures(self, answers: int) -> dict[str, Any]:
        """Stop counting: what it spent per answer."""
        after = self._proc()
        figures: dict[str, Any] = {
            "cpu_ms": round((after[0] - self.before[0]) * 1000 / answers, 3),
            "context_switches": round((after[1] - self.before[1]) / answers, 1),
            "fdatasync": None, "counted_by": "/proc"}
        if self.perf is not None:
            self.perf.send_signal(signal.SIGINT)
            _, report = self.perf.communicate(timeout=30)
            counted = {}
            for line in report.splitlines():
                parts = line.split(",")
                with contextlib.suppress(ValueError, IndexError):
                    counted[parts[2]] = float(parts[0])
            with contextlib.suppress(KeyError):
                figures = {"cpu_ms": round(counted["task-clock"] / answers, 3),
                           "context_switches": round(counted["context-switches"] / answers, 1),
                           "fdatasync": round(counted["syscalls:sys_enter_fdatasync"]
                                              / answers, 2),
                           "counted_by": "perf stat"}
        return figures


def idle(usages: list[Usage]) -> None:
    """Wait until the processes together have used under 1 % of a CPU for 100 ms (at most
    60 s)."""
    deadline = time.monotonic() + 60
    last, quiet = sum(u.busy_ns() for u in usages), 0
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        now = sum(u.busy_ns() for u in usages)
        quiet = quiet + 1 if now - last < 500_000 else 0
        last = now


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`: `clankie serve`'s run process."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


# ------------------------------------------------------------------------- clients


def _client(url: str, token: str, payloads: list[dict[str, Any]], barrier: Any,
            results: Any) -> None:
    with Client(url, token, timeout=60) as client:
        with contextlib.suppress(ClientError):  # the floor server has no such op
            client.call("conversation_list", {"limit": 1})  # connect before the clock
        barrier.wait()
        latencies = []
        for payload in payloads:
            start = time.perf_counter()
            client.call("input_answer", payload)
            latencies.append(time.perf_counter() - start)
    results.put(latencies)


def drive(url: str, token: str, payloads: list[dict[str, Any]], clients: int,
          server: Server | None = None) -> dict[str, Any]:
    """`clients` client processes answer `payloads` between them at once; with `server`,
    what it spent per answer too (`Usage`)."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(clients + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=_client, args=(url, token, payloads[i::clients], barrier,
                                                results)) for i in range(clients)]
    for p in procs:
        p.start()
    usages = [] if server is None else [
        Usage(pid) for pid in (server.proc.pid, *children(server.proc.pid))]
    barrier.wait(timeout=120)
    start = time.perf_counter()
    latencies = [x for _ in procs for x in results.get(timeout=600)]
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join(timeout=60)
    result = summary(latencies, elapsed)
    if usages:
        idle(usages)
        result["server_per_answer"] = usages[0].figures(len(payloads))
        if len(usages) > 1:
            runs = [u.figures(len(payloads)) for u in usages[1:]]
            result["run_process_per_answer"] = runs[0] if len(runs) == 1 else runs
            result["cpu_ms_per_answer_both_processes"] = round(
                result["server_per_answer"]["cpu_ms"] + sum(r["cpu_ms"] for r in runs), 3)
    return result


def pending_answers(client: Client, workspace: Path, count: int) -> list[dict[str, Any]]:
    """`count` conversations, each with one pending question; the answers to send."""
    made = [client.call("conversation_create", {"workspace": str(workspace)})["conversation_id"]
            for _ in range(count)]
    for c in made:
        client.call("conversation_send", {"conversation_id": c, "text": "ask me"})
    settle(client, made)
    payloads = []
    for c in made:
        snap = client.call("input_get", {"conversation_id": c})
        q = snap["pending"]
        payloads.append({"conversation_id": c, "request_id": q["request_id"],
                         "incarnation": snap["incarnation"], "revision": snap["revision"],
                         "option_id": q["options"][0]["option_id"]})
    return payloads


def settle(client: Client, conversation_ids: list[str]) -> None:
    """Wait until each conversation's question is asked and its run has finished (so the
    revision read with the question is the one an answer must name)."""
    deadline = time.monotonic() + 300
    for c in conversation_ids:
        while (client.call("input_get", {"conversation_id": c})["pending"] is None
               or client.call("conversation_get", {"conversation_id": c})["unfinished_runs"]):
            assert time.monotonic() < deadline, "the runs did not finish in time"
            time.sleep(0.01)


# ------------------------------------------------------------------------ measures


def floor(tmp: Path, accepts: int) -> dict[str, Any]:
    listening, database = tmp / "floor.sock", tmp / "floor.db"
    server = Server([sys.executable, str(BENCH / "floor_server.py"), str(listening),
                     str(database)], dict(os.environ), "floor serving")
    try:
        def payloads(n: int) -> list[dict[str, Any]]:
            return [{"conversation_id": str(uuid.uuid4()), "request_id": str(uuid.uuid4()),
                     "incarnation": str(uuid.uuid4()), "revision": 2,
                     "option_id": str(uuid.uuid4())} for _ in range(n)]
        url = f"unix://{listening}"
        for _ in range(50):  # the socket file appears before uvicorn accepts
            if listening.exists():
                break
            time.sleep(0.05)
        return {"1_client": drive(url, "-", payloads(accepts), 1, server),
                "8_clients": drive(url, "-", payloads(accepts * 2), 8, server)}
    finally:
        server.stop()


def accepts_on(server: Server, home: Path, workspace: Path, count: int, clients: int
               ) -> dict[str, Any]:
    with operator(home) as client:
        payloads = pending_answers(client, workspace, count)
        result = drive(f"unix://{home / 'clankie.sock'}", client.token, payloads, clients,
                       server)
        settle(client, [p["conversation_id"] for p in payloads])
    return result


def agent_answers(client: Client, tmp: Path, count: int) -> list[dict[str, Any]]:
    """`count` agent questions pending (an agent credential asks in at most 10 workspaces
    at once, so one credential per 10), answered by the operator: no run follows."""
    payloads = []
    for first in range(0, count, 10):
        agent = client.call("credential_issue", {"kind": "agent", "name": f"bench{first}"})
        with Client(client.url, agent["token"], timeout=60) as asker:
            for i in range(first, min(count, first + 10)):
                workspace = tmp / "agents" / str(i)
                workspace.mkdir(parents=True)
                asked = asker.call("agent_ask", {**ASK, "workspace": str(workspace)})
                snap = client.call("input_get", {"conversation_id": asked["conversation_id"]})
                payloads.append({"conversation_id": asked["conversation_id"],
                                 "request_id": asked["request_id"],
                                 "incarnation": snap["incarnation"],
                                 "revision": snap["revision"],
                                 "option_id": asked["options"][0]["option_id"]})
    return payloads


def accepts_without_runs(server: Server, home: Path, tmp: Path, count: int) -> dict[str, Any]:
    with operator(home) as client:
        payloads = agent_answers(client, tmp, count)
        return drive(f"unix://{home / 'clankie.sock'}", client.token, payloads, 1, server)


def continuation_start(home: Path, workspace: Path, count: int) -> dict[str, Any]:
    """Answer sent -> the continuation's `running` event seen by a waiting tail."""
    samples = []
    with operator(home) as client:
        for payload in pending_answers(client, workspace, count):
            c = payload["conversation_id"]
            after = client.call("events_tail", {"conversation_id": c, "limit": 500}
                                )["next_after"]
            start = time.perf_counter()
            run_id = client.call("input_answer", payload)["receipt"]["run_id"]
            while True:
                page = client.call("events_tail", {"conversation_id": c, "after": after,
                                                   "wait_ms": 5_000})
                after = page["next_after"]
                if any(e["type"] == "run_status" and e["run_id"] == run_id
                       and e["status"] == "running" for e in page["events"]):
                    break
            samples.append(time.perf_counter() - start)
        settle(client, [])
    return summary(samples)


def _tail(url: str, token: str, jobs: Any, seen: Any) -> None:
    """A client process that long-polls each conversation it is given until its run is
    `running`, and reports when that event arrived (CLOCK_MONOTONIC, shared by processes)."""
    with Client(url, token, timeout=60) as client:
        while (job := jobs.get(timeout=600)) is not None:
            c, after = job
            seen.put(("waiting", 0.0))
            while True:
                page = client.call("events_tail", {"conversation_id": c, "after": after,
                                                   "wait_ms": 5_000})
                after = page["next_after"]
                if any(e["type"] == "run_status" and e["status"] == "running"
                       for e in page["events"]):
                    seen.put(("running", time.perf_counter()))
                    break


def continuation_start_waiting(home: Path, workspace: Path, count: int) -> dict[str, Any]:
    """Answer sent -> the `running` event received by a tail that was already waiting, in
    another client process (so neither waits for the other's round trip)."""
    ctx = mp.get_context("spawn")
    jobs, seen = ctx.Queue(), ctx.Queue()
    samples = []
    with operator(home) as client:
        payloads = pending_answers(client, workspace, count)
        tail = ctx.Process(target=_tail, args=(f"unix://{home / 'clankie.sock'}",
                                               client.token, jobs, seen))
        tail.start()
        try:
            for payload in payloads:
                c = payload["conversation_id"]
                jobs.put((c, client.call("events_tail", {"conversation_id": c,
                                                         "limit": 500})["next_after"]))
                assert seen.get(timeout=60)[0] == "waiting"
                time.sleep(0.02)  # its long-poll reaches the server (a bench, not a test)
                start = time.perf_counter()
                client.call("input_answer", payload)
                kind, when = seen.get(timeout=60)
                assert kind == "running"
                samples.append(when - start)
        finally:
            jobs.put(None)
            tail.join(timeout=60)
        settle(client, [p["conversation_id"] for p in payloads])
    return summary(samples)


def reads(home: Path, workspace: Path, events: int, count: int) -> dict[str, Any]:
    with operator(home) as client:
        (payload,) = pending_answers(client, workspace, 1)
        c = payload["conversation_id"]
        already = client.call("events_tail", {"conversation_id": c, "limit": 500})["next_after"]
        if events > already:
            _add_events(home / "clankie.db", c, events - already)
        samples = []
        for _ in range(count):
            start = time.perf_counter()
            snap = client.call("input_get", {"conversation_id": c})
            samples.append(time.perf_counter() - start)
            assert snap["pending"] is not None
        raw = raw_reads(home / "clankie.sock", client.token, c, count)
    return dict(summary(samples), server_seen_by_a_raw_socket_client=raw)


def raw_reads(socket_path: Path, token: str, conversation_id: str, count: int
              ) -> dict[str, Any]:
    """The same `input_get` from a client that costs almost nothing (the request's bytes
    built once, the reply read by its Content-Length): what the server itself takes, and
    so what the httpx client adds."""
    body = json.dumps({"conversation_id": conversation_id}).encode()
    request = (b"POST /v1/ops/input_get HTTP/1.1\r\nhost: clankie\r\n"
               b"authorization: Bearer " + token.encode() + b"\r\n"
               b"content-type: application/json\r\n"
               b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    samples = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(socket_path))
        for _ in range(count):
            start = time.perf_counter()
            sock.sendall(request)
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            while len(rest) < length:
                rest += sock.recv(65536)
            samples.append(time.perf_counter() - start)
            assert head.startswith(b"HTTP/1.1 200") and json.loads(rest)["pending"]
    return summary(samples)


def _add_events(db: Path, conversation_id: str, count: int) -> None:
    """Append `count` message events in one transaction through the store's own save path."""
    store = Store(db)

    def add() -> None:
        with store.write() as tx:
            conversation = tx.conversation(conversation_id)
            assert conversation is not None
            now = datetime.now(UTC)
            events = tuple(MessagePosted(Message(f"m{i}", conversation_id, Author.OWNER,
                                                 "filler", now)) for i in range(count))
            tx.save(Change(replace(conversation, revision=conversation.revision + 1),
                           events=events), receipt_limit=16, event_retention=200_000)
    try:
        store.run(add)
    finally:
        store.close()


def _rows(db: Path, conversations: int, workspace: Path, pending: bool) -> list[str]:
    """Insert conversations straight into a stopped service's store (fast, for scale);
    with `pending`, each with a pending question and a queued run."""
    conn = sqlite3.connect(db)
    try:
        owner = conn.execute("SELECT owner_id FROM owners").fetchone()[0]
        ws = workspace.stat()
        now = datetime.now(UTC)
        ids = [str(uuid.uuid4()) for _ in range(conversations)]
        top = conn.execute("SELECT coalesce(max(activity), 0) FROM conversations").fetchone()[0]
        with conn:
            conn.executemany(
                "INSERT INTO conversations (conversation_id, kind, owner_id, workspace_path, "
                "workspace_dev, workspace_ino, incarnation, revision, native_owner, created_at, "
                "activity, activity_at) VALUES (?, 'owner', ?, ?, ?, ?, ?, 2, NULL, ?, ?, ?)",
                [(c, owner, str(workspace.resolve()), ws.st_dev, ws.st_ino, c, iso(now),
                  top + i + 1, iso(now)) for i, c in enumerate(ids)])
            if pending:
                conn.executemany(
                    "INSERT INTO runs (run_id, conversation_id, kind, status, incarnation, "
                    "created_at) VALUES (?, ?, 'turn', 'queued', ?, ?)",
                    [(str(uuid.uuid4()), c, c, iso(now)) for c in ids])
                conn.executemany(
                    "INSERT INTO questions (request_id, conversation_id, kind, prompt, "
                    "allow_text, status, incarnation, workspace_path, workspace_dev, "
                    "workspace_ino, asked_at, expires_at, asked_by_run) VALUES "
                    "(?, ?, 'text', 'Name?', 1, 'pending', ?, ?, ?, ?, ?, ?, 'bench')",
                    [(str(uuid.uuid4()), c, c, str(workspace.resolve()), ws.st_dev,
                      ws.st_ino, iso(now), iso(now + timedelta(days=1))) for c in ids])
        return ids
    finally:
        conn.close()


def ready_after_kill(tmp: Path, workspace: Path, count: int) -> dict[str, Any]:
    home = tmp / "home-kill"
    server = serve(home)
    server.stop(signal.SIGKILL)
    _rows(home / "clankie.db", count, workspace, pending=True)
    again = serve(home)
    try:
        recovered = [line.strip() for line in again.lines if "start-up recovery" in line]
        return {"pending_questions": count, "queued_runs": count,
                "ready_s": round(again.ready_s, 3), "log": recovered[-1] if recovered else None}
    finally:
        again.stop()


def listing(tmp: Path, workspace: Path, count: int, calls: int) -> dict[str, Any]:
    home = tmp / "home-list"
    server = serve(home)
    server.stop()
    ids = _rows(home / "clankie.db", count, workspace, pending=False)
    server = serve(home)
    rng = random.Random(7)
    try:
        with operator(home) as client:
            page, prefix = [], []
            for _ in range(calls):
                start = time.perf_counter()
                got = client.call("conversation_list", {"limit": 100})
                page.append(time.perf_counter() - start)
                assert len(got["conversations"]) == 100 and got["next_after"]
                wanted = rng.choice(ids)
                start = time.perf_counter()
                got = client.call("conversation_list", {"prefix": wanted[:8], "limit": 10})
                prefix.append(time.perf_counter() - start)
                assert wanted in [c["conversation_id"] for c in got["conversations"]]
        return {"conversations": count, "page_of_100": summary(page),
                "prefix_lookup": summary(prefix)}
    finally:
        server.stop()


def with_ratio(figure: dict[str, Any], floor_figure: dict[str, Any]) -> dict[str, Any]:
    return dict(figure, floor_p50_ms=floor_figure["p50_ms"],
                ratio_p50_to_floor=round(figure["p50_ms"] / floor_figure["p50_ms"], 2),
                floor_per_second=floor_figure.get("per_second"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accepts", type=int, default=400, help="answers for 1 client")
    parser.add_argument("--reads", type=int, default=500, help="input_get calls per case")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--src", type=Path, help="serve the clankie of another tree's src")
    args = parser.parse_args()
    if args.src is not None:
        SOURCE.append(str(args.src.resolve()))
    accepts = 40 if args.quick else args.accepts
    reads_n = 50 if args.quick else args.reads
    scale = 500 if args.quick else 10_000
    with tempfile.TemporaryDirectory(prefix="clankie-bench-") as name:
        tmp = Path(name)
        workspace = tmp / "project"
        workspace.mkdir()
        (tmp / "script.json").write_text(json.dumps(SCRIPT))
        base = floor(tmp, accepts)
        home = tmp / "home"
        server = serve(home, tmp / "script.json")
        try:
            one = accepts_on(server, home, workspace, accepts, 1)
            eight = accepts_on(server, home, workspace, accepts * 2, 8)
            bare = accepts_without_runs(server, home, tmp, accepts)
            handoff = continuation_start(home, workspace, max(20, accepts // 4))
            waiting = continuation_start_waiting(home, workspace, max(20, accepts // 4))
            few = reads(home, workspace, 10, reads_n)
            many = reads(home, workspace, 100_000 if not args.quick else 5_000, reads_n)
        finally:
            server.stop()
        restart = ready_after_kill(tmp, workspace, scale)
        listed = listing(tmp, workspace, scale * 5, max(20, reads_n // 5))
    result = {
        "benchmark": "bench/accept.py",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "sqlite": sqlite3.sqlite_version, "platform": platform.platform()},
        "transport": "unix socket; server and clients in their own processes",
        "synchronous": "FULL",
        "served_from": SOURCE[0] if SOURCE else "this tree",
        "floor": base,
        "input_answer_1_client": dict(
            with_ratio(one, base["1_client"]),
            ratio_p99_to_floor_p99=round(one["p99_ms"] / base["1_client"]["p99_ms"], 2),
            target="p50 <= 2.5x floor, p99 <= 4x the floor's p99; server per answer: "
                   "cpu <= 2.5 ms, context switches <= 15"),
        "input_answer_8_clients": dict(
            with_ratio(eight, base["8_clients"]),
            rate_to_floor_rate=round(eight["per_second"] / base["8_clients"]["per_second"], 2),
            rate_to_own_1_client_rate=round(eight["per_second"] / one["per_second"], 2),
            target=">= 1.2x its own 1-client rate"),
        "input_answer_1_client_no_continuation": dict(
            with_ratio(bare, base["1_client"]),
            what="an agent's question answered by the operator: the accept, no run after it"),
        "continuation_running_seen_by_tail": dict(handoff, target="p50 <= 3 ms"),
        "continuation_running_seen_by_a_tail_already_waiting": dict(
            waiting, target="p50 <= 3 ms"),
        "input_get_10_events": dict(few, target="p50 <= 0.6 ms"),
        "input_get_many_events": dict(
            many, ratio_to_10_events=round(many["p50_ms"] / few["p50_ms"], 2),
            target="within 1.1x of 10 events"),
        "serve_ready_after_kill": dict(restart, target="<= 1 s"),
        "conversation_list": dict(listed, target="p50 <= 5 ms each"),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
