"""Bench of the phone page's live reply (SPEC D17, D21): how soon the first content of a
reply reaches the page's DOM, in Debian's chromium at a phone's viewport (390 x 844), on a
real `clankie serve --web` (the openai provider, its official SDK) against
`bench/stream_endpoint.py`, the fake endpoint that streams on a schedule. Prints one JSON
document.

- `first_content_to_dom_ms`: the endpoint writes a reply's first content -> the page's
  `#live-text` holds it (a MutationObserver's time, the browser's clock mapped onto this
  machine's monotonic clock). D21's target: within 200 ms.
- baselines, in the same run and the same rounds:
  - `baseline_live_long_poll_ms`: the same first content -> a bare live long-poll reader
    (a process of its own, as in `bench/stream.py`) answering with it: the service's part;
  - `baseline_message_to_dom_ms`: an owner's message sent -> the same page showing it in
    its context (a durable event: the page's long-poll, then its view), the path every
    change took before D17.

The endpoint writes the first content `first_ms` after the request (a model thinks first),
so the page waits for it in a long-poll as it would for a real model.

    .venv/bin/python bench/stream_page.py [--quick] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accept import SOURCE, Server, operator, percentile
from stream import Endpoint, Readers, finished, new_conversation

WEB = re.compile(r"the phone page on (http://\S+)")
PHONE = {"width": 390, "height": 844}

# In the page: when the live reply's first text, and a marker text in the context, first
# appear in the DOM (the browser's wall clock, in ms since the epoch).
OBSERVE = """
window.bench = { marker: null, markerAt: null, liveAt: null };
new MutationObserver(function () {
  const b = window.bench;
  const now = performance.timeOrigin + performance.now();
  const live = document.getElementById("live-text");
  if (b.liveAt === null && live && live.textContent.length) b.liveAt = now;
  const context = document.getElementById("context");
  if (b.marker && b.markerAt === null && context && context.textContent.includes(b.marker)) {
    b.markerAt = now;
  }
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def serve(home: Path, endpoint: Endpoint) -> tuple[Server, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLANKIE_")}
    env.update(CLANKIE_HOME=str(home), CLANKIE_MODEL="openai", OPENAI_API_KEY="bench",
               CLANKIE_OPENAI_BASE_URL=endpoint.url, CLANKIE_OPENAI_MODEL="bench",
               CLANKIE_MODEL_RETRIES="0", CLANKIE_MAX_STEPS="1")
    if SOURCE:
        env["PYTHONPATH"] = SOURCE[0]
    import subprocess

    subprocess.run([sys.executable, "-m", "clankie", "init"], env=env, check=True,
                   capture_output=True)
    server = Server([sys.executable, "-m", "clankie", "serve", "--web", "127.0.0.1:0"],
                    env, "clankie serving on")
    found = next(m for line in server.lines if (m := WEB.search(line)))
    return server, found.group(1)


def chromium() -> str:
    found = os.environ.get("CHROMIUM_PATH") or next(
        (p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))),
        None)
    if found is None:
        raise SystemExit("no chromium found (apt-get install chromium, or CHROMIUM_PATH)")
    return found


def to_monotonic(wall_ms: float) -> float:
    """A time of the browser's wall clock as this machine's monotonic clock (seconds)."""
    offset = statistics.mean(time.time() - time.monotonic() for _ in range(5))
    return wall_ms / 1000 - offset


def wait_for(page: Any, expression: str, timeout: float = 60) -> Any:
    """`expression`'s value in the page once truthy (polled: the page's CSP forbids the
    eval that Playwright's `wait_for_function` uses)."""
    deadline = time.monotonic() + timeout
    while not (value := page.evaluate(expression)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the page never had {expression}")
        page.wait_for_timeout(20)
    return value


def stats(samples: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(samples), 1),
            "p99": round(percentile(samples, 0.99), 1),
            "max": round(max(samples), 1)}


def measure(web_url: str, home: Path, workspace: Path, endpoint: Endpoint, rounds: int,
            first_ms: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    # a reply of a second (100 chunks, 10 ms apart): still being written when the page looks
    endpoint.plan(chunks=100, every_ms=10, size=8, first_ms=first_ms)
    to_dom, long_poll, message = [], [], []
    with operator(home) as client, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium())
        try:
            page = browser.new_context(viewport=PHONE, is_mobile=True,
                                       has_touch=True).new_page()
            page.add_init_script(OBSERVE)
            code = client.call("device_pair_start", {"name": "bench"})["code"]
            page.goto(f"{web_url}/pair?code={code}")
            page.get_by_role("button", name="Pair this browser").click()
            page.wait_for_selector("#state", timeout=30_000)
            c = new_conversation(client, workspace)
            page.goto(f"{web_url}/?c={c}")
            page.wait_for_selector("#live-slot", state="attached", timeout=30_000)
            readers = Readers(home, [c], 1)
            try:
                for n in range(rounds):
                    # the page at rest, in its long-poll, as when an owner sends from the
                    # computer and watches the phone (not just after its last view)
                    page.wait_for_timeout(1_500)
                    marker = f"round {n} of the bench"
                    page.evaluate(f"window.bench = {{ marker: {marker!r}, markerAt: null, "
                                  "liveAt: null }")
                    before = len(endpoint.log())
                    sent = time.monotonic()
                    run_id = client.call("conversation_send", {
                        "conversation_id": c, "text": marker})["run_id"]
                    readers.get("message")
                    first_read = readers.get("first")
                    shown_at = wait_for(page, "window.bench.markerAt")
                    live_at = wait_for(page, "window.bench.liveAt")
                    finished(client, run_id)
                    log = endpoint.log()
                    assert len(log) == before + 1, log[before:]
                    written = log[-1]["first"]
                    to_dom.append((to_monotonic(live_at) - written) * 1000)
                    long_poll.append((first_read - written) * 1000)
                    message.append((to_monotonic(shown_at) - sent) * 1000)
                    # the stored message has replaced the live reply before the next round
                    wait_for(page, "document.getElementById('live') === null || "
                                   "document.getElementById('live').hidden")
            finally:
                readers.stop()
        finally:
            browser.close()
    return {"rounds": rounds, "endpoint_first_ms": first_ms,
            "first_content_to_dom_ms": stats(to_dom),
            "baseline_live_long_poll_ms": stats(long_poll),
            "baseline_message_to_dom_ms": stats(message),
            "target": "first content to the page's DOM within 200 ms (D21)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few rounds, for a smoke run")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--first-ms", type=int, default=800,
                        help="the endpoint's wait before a reply's first content")
    args = parser.parse_args()
    endpoint = Endpoint()
    result: dict[str, Any] = {"machine": f"{os.cpu_count()} cores, Python "
                                         f"{platform.python_version()}",
                              "load_average": [round(x, 2) for x in os.getloadavg()],
                              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="clankie-page-bench-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        home = tmp / "home"
        server, web_url = serve(home, endpoint)
        try:
            result["page"] = measure(web_url, home, workspace, endpoint,
                                     5 if args.quick else args.rounds, args.first_ms)
        finally:
            server.stop()
            endpoint.stop()
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    import json

    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
