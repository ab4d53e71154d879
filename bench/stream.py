"""Bench of replies that stream (SPEC D21) on a real `clankie serve` (the openai provider, its
official SDK) against `bench/stream_endpoint.py`, a fake endpoint on loopback that streams
on a schedule; each figure next to its own baseline in the same run. Every server and every
reader is a process of its own. Prints one JSON document.

- `first_content`: the endpoint writes a reply's first content -> a reader's live long-poll
  (already waiting in another process) answers with it; baseline: an owner's message sent
  -> the same kind of waiting reader answering with its `message` event (V1's own wake);
- `cpu_per_chunk_us`: what the service (both its processes) spends per provider chunk over
  the same stream read by the SDK alone in a process of its own (each: a reply of N chunks
  minus a reply of one chunk, so a run's fixed costs and the SDK's import cancel out);
- `cpu_per_reader_publish_us`: the service's CPU with two live readers over none, per
  reader and publish;
- `load`: 8 conversations streaming 100 chunks a second each, 2 live readers each: the
  service's CPU as a fraction of one core (and that fraction beyond the SDKs' own parsing),
  and the answer-accept median (an agent's question answered: A9) next to the same without
  the streams;
- `memory`: what the service holds for one live reply (the run process's `Shown` and the
  service's `LiveReplies`, fed in this process and measured with `tracemalloc` at its peak)
  while a 256 KiB reply arrives in 1-character and in 1-KiB pieces, next to D21's bound
  (twice the text plus 64 KiB); and, for context, the whole service process's RSS growth
  over the same reply streamed through it (SQLite's page cache, the SDK's parsing and the
  allocator's arenas included).

    .venv/bin/python bench/stream.py [--quick] [--src OTHER/src]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accept import (
    SOURCE,
    Server,
    Usage,
    agent_answers,
    children,
    drive,
    idle,
    operator,
    percentile,
)

from clankie.client import Client

BENCH = Path(__file__).resolve().parent


class Endpoint:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(BENCH / "stream_endpoint.py")],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = json.loads(self.proc.stdout.readline())["url"]
        parts = urlsplit(self.url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request(method, path, json.dumps(body) if body is not None else None,
                         {"content-type": "application/json"})
            reply = conn.getresponse().read()
            return json.loads(reply) if reply else None
        finally:
            conn.close()

    def plan(self, **plan: float) -> None:
        self._call("POST", "/plan", plan)

    def log(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/log")
        return result

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def serve_openai(home: Path, endpoint: Endpoint) -> Server:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLANKIE_")}
    env.update(CLANKIE_HOME=str(home), CLANKIE_MODEL="openai", OPENAI_API_KEY="bench",
               CLANKIE_OPENAI_BASE_URL=endpoint.url, CLANKIE_OPENAI_MODEL="bench",
               CLANKIE_MODEL_RETRIES="0", CLANKIE_MAX_STEPS="1")
    if SOURCE:
        env["PYTHONPATH"] = SOURCE[0]
    if not (home / "operator.token").exists():
        subprocess.run([sys.executable, "-m", "clankie", "init"], env=env, check=True,
                       capture_output=True)
    return Server([sys.executable, "-m", "clankie", "serve"], env, "clankie serving on")


def url_token(home: Path) -> tuple[str, str]:
    return f"unix://{home / 'clankie.sock'}", (home / "operator.token").read_text().strip()


def new_conversation(client: Client, workspace: Path) -> str:
    return str(client.call("conversation_create",
                           {"workspace": str(workspace)})["conversation_id"])


def finished(client: Client, run_id: str) -> None:
    deadline = time.monotonic() + 300
    while client.call("run_get", {"run_id": run_id})["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, "a run did not finish"
        time.sleep(0.01)


# ------------------------------------------------------------------------- readers


def _reader(url: str, token: str, c: str, ready: Any, stop: Any, out: Any) -> None:
    """Follow `c` with live long-polls until `stop`; put (what, monotonic time) for each
    owner message and each new reply's first content, and the count of live answers."""
    seen: set[str] = set()
    at: dict[str, Any] = {"reply_id": None, "offset": 0}
    after, answers = 0, 0
    with Client(url, token, timeout=60) as client:
        page = client.call("events_tail", {"conversation_id": c, "limit": 500})
        after = page["next_after"]
        ready.set()
        while not stop.is_set():
            page = client.call("events_tail", {"conversation_id": c, "after": after,
                                               "limit": 500, "wait_ms": 500, "live": at})
            now = time.monotonic()
            after = page["next_after"]
            for event in page["events"]:
                if event["type"] == "message" and event["author"] == "owner":
                    out.put(("message", now))
            live = page.get("live")
            if live is None:
                at = {"reply_id": None, "offset": 0}
                continue
            answers += 1
            if live["length"] and live["reply_id"] not in seen:
                seen.add(live["reply_id"])
                out.put(("first", now))
            at = {"reply_id": live["reply_id"], "offset": live["length"]}
    out.put(("answers", answers))


class Readers:
    def __init__(self, home: Path, conversation_ids: list[str], each: int) -> None:
        ctx = mp.get_context("spawn")
        url, token = url_token(home)
        self.stop_event = ctx.Event()
        self.out = ctx.Queue()
        readies = []
        self.procs = []
        for c in conversation_ids:
            for _ in range(each):
                ready = ctx.Event()
                readies.append(ready)
                self.procs.append(ctx.Process(target=_reader, args=(
                    url, token, c, ready, self.stop_event, self.out)))
        for p in self.procs:
            p.start()
        for ready in readies:
            assert ready.wait(60), "a reader did not start"

    def get(self, what: str, timeout: float = 60) -> float:
        while True:
            kind, value = self.out.get(timeout=timeout)
            if kind == what:
                return float(value)

    def stop(self) -> int:
        """Stop them; how many live answers they got in all."""
        self.stop_event.set()
        answers = 0
        for _ in self.procs:
            while True:
                kind, value = self.out.get(timeout=60)
                if kind == "answers":
                    answers += int(value)
                    break
        for p in self.procs:
            p.join(timeout=30)
        return answers


# ------------------------------------------------------------------------ measures


def first_content(home: Path, workspace: Path, endpoint: Endpoint, rounds: int
                  ) -> dict[str, Any]:
    endpoint.plan(chunks=5, every_ms=10, size=8, first_ms=150)
    with operator(home) as client:
        c = new_conversation(client, workspace)
        readers = Readers(home, [c], 1)
        live_ms, wake_ms = [], []
        try:
            for _ in range(rounds):
                before = len(endpoint.log())
                sent = time.monotonic()
                run_id = client.call("conversation_send", {"conversation_id": c,
                                                           "text": "go"})["run_id"]
                wake_ms.append((readers.get("message") - sent) * 1000)
                first = readers.get("first")
                finished(client, run_id)
                log = endpoint.log()
                assert len(log) == before + 1, log[before:]
                live_ms.append((first - log[-1]["first"]) * 1000)
        finally:
            readers.stop()
    return {"live_long_poll_ms": {"p50": round(statistics.median(live_ms), 2),
                                  "p99": round(percentile(live_ms, 0.99), 2)},
            "baseline_message_wake_ms": {"p50": round(statistics.median(wake_ms), 2),
                                         "p99": round(percentile(wake_ms, 0.99), 2)},
            "target": "p50 <= 20 ms, p99 <= 100 ms"}


def service_cpu(server: Server, home: Path, workspace: Path, endpoint: Endpoint,
                chunks: int, readers: int = 0, every_ms: float = 0) -> tuple[float, int]:
    """CPU seconds of both service processes for one reply of `chunks` chunks (with
    `readers` live readers), and the readers' live answers."""
    endpoint.plan(chunks=chunks, every_ms=every_ms, size=8, first_ms=0)
    with operator(home) as client:
        c = new_conversation(client, workspace)
        following = Readers(home, [c], readers) if readers else None
        usages = [Usage(pid) for pid in (server.proc.pid, *children(server.proc.pid))]
        before = [u._proc()[0] for u in usages]
        run_id = client.call("conversation_send", {"conversation_id": c, "text": "go"})[
            "run_id"]
        finished(client, run_id)
        answers = following.stop() if following else 0
        idle(usages)
        spent = sum(u._proc()[0] - b for u, b in zip(usages, before, strict=True))
        for u in usages:
            if u.perf is not None:
                u.perf.kill()
    return spent, answers


SDK_ALONE = """
import json, resource, sys, time
import openai
client = openai.OpenAI(api_key="bench", base_url=sys.argv[1], max_retries=0)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
before = cpu()
stream = client.chat.completions.create(model="bench", stream=True,
                                        messages=[{"role": "user", "content": "go"}])
text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
print(json.dumps({"cpu": cpu() - before, "chars": len(text)}))
"""


def sdk_alone(endpoint: Endpoint, chunks: int) -> float:
    endpoint.plan(chunks=chunks, every_ms=0, size=8, first_ms=0)
    env = dict(os.environ)
    if SOURCE:
        env["PYTHONPATH"] = SOURCE[0]
    done = subprocess.run([sys.executable, "-c", SDK_ALONE, endpoint.url], env=env,
                          capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout)["cpu"])


def cpu_per_chunk(server: Server, home: Path, workspace: Path, endpoint: Endpoint,
                  chunks: int, rounds: int) -> dict[str, Any]:
    service, sdk = [], []
    for _ in range(rounds):
        many, _ = service_cpu(server, home, workspace, endpoint, chunks)
        one, _ = service_cpu(server, home, workspace, endpoint, 1)
        service.append((many - one) / (chunks - 1))
        sdk.append((sdk_alone(endpoint, chunks) - sdk_alone(endpoint, 1)) / (chunks - 1))
    per_service, per_sdk = statistics.median(service), statistics.median(sdk)
    return {"service_us": round(per_service * 1e6, 1), "sdk_alone_us": round(per_sdk * 1e6, 1),
            "added_us": round((per_service - per_sdk) * 1e6, 1), "chunks": chunks,
            "target": "added <= 50 us"}


def cpu_per_reader_publish(server: Server, home: Path, workspace: Path, endpoint: Endpoint,
                           rounds: int) -> dict[str, Any]:
    figures = []
    for _ in range(rounds):  # 300 chunks, 10 ms apart: 3 s, about 30 publishes
        alone, _ = service_cpu(server, home, workspace, endpoint, 300, 0, every_ms=10)
        read, answers = service_cpu(server, home, workspace, endpoint, 300, 2, every_ms=10)
        figures.append((read - alone) / max(1, answers) * 1e6)
    return {"us": round(statistics.median(figures), 1), "target": "<= 1,000 us"}


def load(server: Server, home: Path, workspace: Path, tmp: Path, endpoint: Endpoint,
         seconds: float, accepts: int) -> dict[str, Any]:
    url, token = url_token(home)
    with operator(home) as client:
        quiet = drive(url, token, agent_answers(client, tmp / "quiet", accepts), 1)
        conversations = [new_conversation(client, workspace) for _ in range(8)]
        readers = Readers(home, conversations, 2)
        chunks = int(seconds * 100)
        endpoint.plan(chunks=chunks, every_ms=10, size=8, first_ms=0)
        payloads = agent_answers(client, tmp / "busy", accepts)
        usages = [Usage(pid) for pid in (server.proc.pid, *children(server.proc.pid))]
        before = [u._proc()[0] for u in usages]
        started = time.monotonic()
        runs = [client.call("conversation_send", {"conversation_id": c, "text": "go"})[
            "run_id"] for c in conversations]
        busy = drive(url, token, payloads, 1)
        for run_id in runs:
            finished(client, run_id)
        elapsed = time.monotonic() - started
        spent = sum(u._proc()[0] - b for u, b in zip(usages, before, strict=True))
        readers.stop()
        for u in usages:
            if u.perf is not None:
                u.perf.kill()
    sdk = (sdk_alone(endpoint, 2_000) - sdk_alone(endpoint, 1)) / 1_999 * chunks * 8
    return {"streams": 8, "chunks_each": chunks, "readers_each": 2,
            "service_cores": round(spent / elapsed, 3),
            "service_cores_beyond_sdk_parsing": round((spent - sdk) / elapsed, 3),
            "accept_p50_ms_quiet": quiet["p50_ms"], "accept_p50_ms_streaming": busy["p50_ms"],
            "accept_ratio": round(busy["p50_ms"] / quiet["p50_ms"], 2),
            "target": "beyond SDK parsing < 0.5 core; accept ratio <= 1.25"}


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _sample(pid: int, peak: list[int], done: threading.Event) -> None:
    while not done.is_set():
        peak[0] = max(peak[0], _rss_kib(pid))
        time.sleep(0.01)


def held_kib(chars: int, size: int) -> dict[str, int]:
    """Peak memory, traced, of one live reply of `chars` characters arriving in pieces of
    `size` (not Latin-1, so no piece is a cached one-character string and each character
    takes two bytes), published as it goes: the run process's side and the service's side
    together, next to D21's bound for that text."""
    import tracemalloc

    from clankie.service.live import LiveReplies
    from clankie.service.showing import Publisher
    from clankie.settings import Settings

    replies = LiveReplies(lambda conversation_id: None)
    publisher = Publisher(replies.publish, Settings(stream_interval=0.02), lambda s: None)
    piece = "é" * (size - 1)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    shown = publisher.shown("c", "r")
    shown.begin()
    for n in range(chars // size):
        shown.text(piece + chr(0x100 + n % 256), 0)  # each piece a new string
    shown.end()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    held = replies.of_run("c", "r")
    text = sys.getsizeof(held[1] if held else "") // 1024
    return {"text_kib": text, "held_kib": (peak - base) // 1024, "bound_kib": 2 * text + 64}


def memory(server: Server, home: Path, workspace: Path, endpoint: Endpoint,
           chars: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"chars": chars}
    for name, size in (("1_char_chunks", 1), ("1_kib_chunks", 1024)):
        figures[f"held_{name}"] = held_kib(chars, size)
        endpoint.plan(chunks=chars // size, every_ms=0, size=size, first_ms=0)
        with operator(home) as client:
            c = new_conversation(client, workspace)
            base = _rss_kib(server.proc.pid)
            peak = [base]
            done = threading.Event()
            sampler = threading.Thread(target=_sample, args=(server.proc.pid, peak, done),
                                       daemon=True)
            sampler.start()
            run_id = client.call("conversation_send", {"conversation_id": c, "text": "go"})[
                "run_id"]
            finished(client, run_id)
            done.set()
            sampler.join()
        figures[f"service_rss_growth_kib_{name}"] = peak[0] - base
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--src", help="serve the clankie of another tree's src")
    parser.add_argument("--only", action="append", choices=(
        "first_content", "cpu_per_chunk", "cpu_per_reader_publish", "load", "memory"),
        help="only this figure (repeat for more)")
    args = parser.parse_args()
    only = set(args.only or ("first_content", "cpu_per_chunk", "cpu_per_reader_publish",
                             "load", "memory"))
    if args.src:
        SOURCE.append(str(Path(args.src).resolve()))
    quick = args.quick
    endpoint = Endpoint()
    result: dict[str, Any] = {"machine": f"{os.cpu_count()} cores, Python "
                                         f"{platform.python_version()}",
                              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="clankie-stream-bench-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        home = tmp / "home"
        server = serve_openai(home, endpoint)
        try:
            service_cpu(server, home, workspace, endpoint, 1)  # the SDK's import, first
            if "first_content" in only:
                result["first_content"] = first_content(home, workspace, endpoint,
                                                        5 if quick else 40)
            if "cpu_per_chunk" in only:
                result["cpu_per_chunk"] = cpu_per_chunk(server, home, workspace, endpoint,
                                                        500 if quick else 5_000,
                                                        1 if quick else 3)
            if "cpu_per_reader_publish" in only:
                result["cpu_per_reader_publish"] = cpu_per_reader_publish(
                    server, home, workspace, endpoint, 1 if quick else 3)
            if "load" in only:
                result["load"] = load(server, home, workspace, tmp, endpoint,
                                      2 if quick else 5, 50 if quick else 200)
            if "memory" in only:
                result["memory"] = memory(server, home, workspace, endpoint,
                                          64 * 1024 if quick else 256 * 1024)
            result["serve_pid"] = server.proc.pid
        finally:
            server.stop()
            endpoint.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
