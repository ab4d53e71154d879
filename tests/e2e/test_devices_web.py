"""SPEC H1 and H2 through a real `clankie serve --web` and the real CLI: `clankie devices
pair --web` prints the URL, a QR code and the confirmation word and waits; the browser's
POST (never a GET) pairs; `devices list` shows it; `devices revoke` ends it."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.served import ROOT, LineReader, Served, clankie


@pytest.fixture
def web(tmp_path: Path) -> Iterator[Served]:
    server = Served.start(tmp_path / "home", "--web", "127.0.0.1:0")
    try:
        yield server
    finally:
        server.stop()


def pair_process(served: Served, *args: str, stderr: Any = subprocess.STDOUT
                 ) -> tuple[subprocess.Popen[str], LineReader]:
    env = dict(os.environ, CLANKIE_HOME=str(served.home.path), PYTHONPATH=str(ROOT / "src"))
    env.pop("CLANKIE_URL", None)
    env.pop("CLANKIE_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "clankie", "devices", "pair", "--web", *args],
                            env=env, cwd=ROOT, text=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=stderr)
    return proc, LineReader(proc.stdout)


PIXEL = ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
         "Chrome/156.0.0.0 Mobile Safari/537.36")


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, html
    return found.group(1)


def test_h2_cli_pairs_a_browser_by_post_lists_and_revokes_it(web: Served):
    proc, lines = pair_process(web, "--name", "phone", "--mode", "read_only", "--here")
    try:
        url = lines.until(lambda line: "/pair?code=" in line, 30).strip()
        assert url.startswith(web.web_url + "/pair?code=")
        word = lines.until(lambda line: "confirmation word" in line, 30).split()[-1]
        assert any("█" in line or "▀" in line for line in lines.seen)  # the QR code
        with httpx.Client(base_url=web.web_url, timeout=10) as browser:
            for _ in range(3):  # a GET alone (a link preview) never pairs
                shown = browser.get(url)
            assert "Pair this browser as phone?" in shown.text and word in shown.text
            assert proc.poll() is None
            paired = browser.post("/pair", headers={"Origin": web.web_url, "User-Agent": PIXEL},
                                  data={"code": url.split("code=")[1],
                                        "csrf": csrf_of(shown.text)})
            assert (paired.status_code, paired.json()["outcome"]) == (200, "paired")
            cookie = paired.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie
            browser.headers["X-Clankie-Key"] = paired.json()["key"]  # as the page keeps it
            assert "Secure" not in cookie  # web_origin is not HTTPS here
            said = lines.until(lambda line: line.startswith("paired: phone (read_only)"), 30)
            assert proc.wait(timeout=30) == 0
            # H2: what paired, when, and how to undo it at once: a stranger's use is seen
            seen = lines.all_lines(10)
            told = "".join(seen[seen.index(said):])
            device = said.split("device ")[1].split()[0].strip(",")
            assert "Chrome 156 on Android" in told and PIXEL not in told
            assert re.search(r"\b\d\d:\d\d\b", told)
            assert f"clankie devices revoke {device}" in told
            assert browser.get("/view").status_code == 200
            listed = clankie("devices", "list", home=web.home.path)
            assert listed.returncode == 0 and "phone" in listed.stdout
            assert "last used" in listed.stdout
            assert "by Chrome 156 on Android" in listed.stdout  # H2: what paired, kept
            device_id = listed.stdout.split()[0]
            # a prefix, as every ID the CLI takes (SPEC section 10 "CLI"; issue 21's trial)
            unknown = clankie("devices", "revoke", "0000", home=web.home.path)
            assert unknown.returncode == 2 and "no device starts with '0000'" in unknown.stderr
            assert browser.get("/view").status_code == 200  # nothing was revoked
            revoked = clankie("devices", "revoke", device_id[:6].upper(), home=web.home.path)
            assert revoked.returncode == 0, revoked.stderr
            assert f"revoked {device_id}" in revoked.stdout
            assert browser.get("/view").status_code == 401
            assert "revoked" in clankie("devices", "list", home=web.home.path).stdout
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
    assert cookie.split(";")[0].split("=", 1)[1] not in "".join(web.log)


def test_h2_issue42_pair_web_json_prints_one_object_a_line_and_says_so_in_help(
        web: Served, tmp_path: Path):
    """Issue 42: `devices pair --web --json` prints while it runs, so its objects are JSON
    Lines: the pairing (URL, code, word, expiry) as one line at once, then what paired as
    another; each parses alone, as a program reading line by line needs. --help says so."""
    helped = clankie("devices", "pair", "--help", home=web.home.path)
    assert "JSON Lines" in " ".join(helped.stdout.split()), helped.stdout
    with (tmp_path / "stderr").open("w") as errors:
        proc, lines = pair_process(web, "--here", "--json", "--name", "pixel", "--mode",
                                   "read_only", stderr=errors)
        try:
            started = json.loads(lines.until(lambda line: True, 30))
            assert {"pairing_id", "code", "word", "expires_at", "url"} <= set(started)
            with httpx.Client(base_url=web.web_url, timeout=10) as browser:
                shown = browser.get(started["url"])
                assert started["word"] in shown.text
                browser.post("/pair", headers={"Origin": web.web_url, "User-Agent": PIXEL},
                             data={"code": started["code"], "csrf": csrf_of(shown.text)})
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
    said = lines.all_lines(10)
    assert len(said) == 2, said
    paired = json.loads(said[1])
    assert paired["paired"] == started["pairing_id"] and paired["browser"]
    # issue 42 (trial): what paired is named as data; `paired` is kept for compatibility
    assert (paired["credential_id"], paired["name"], paired["mode"]) == (
        paired["paired"], "pixel", "read_only")


def test_section10_issue42_pair_web_json_failures_are_problem_documents(
        web: Served, tmp_path: Path):
    """Issue 42: with --json, each way `devices pair --web` fails is a problem document on
    stdout (one line: it prints JSON Lines), with the exit code it has in words: no
    web_origin (2, `invalid_request` and the fix), no page (1), and the service gone while
    it waits (1, `service_unreachable`, after the pairing's own line)."""
    bare = clankie("devices", "pair", "--web", "--json", home=web.home.path)
    assert bare.returncode == 2 and len(bare.stdout.splitlines()) == 1, bare.stdout
    problem = json.loads(bare.stdout)
    assert (problem["code"], problem["status"]) == ("invalid_request", 422)
    assert "web_origin" in problem["detail"] and "--here" in problem["fix"]
    assert pairings(web) == 0
    plain = Served.start(tmp_path / "plain")  # no --web
    try:
        no_page = clankie("devices", "pair", "--web", "--json", home=plain.home.path)
    finally:
        plain.stop()
    assert no_page.returncode == 1 and len(no_page.stdout.splitlines()) == 1, no_page.stdout
    problem = json.loads(no_page.stdout)
    assert problem["code"] == "web_not_served" and "clankie serve --web" in problem["fix"]
    with (tmp_path / "stderr").open("w") as errors:
        proc, lines = pair_process(web, "--here", "--json", "--name", "pixel", "--mode",
                                   "read_only", stderr=errors)
        try:
            started = json.loads(lines.until(lambda line: True, 30))
            web.stop()
            assert proc.wait(timeout=30) == 1
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
    said = lines.all_lines(10)
    assert len(said) == 2 and json.loads(said[0]) == started, said
    gone = json.loads(said[1])
    assert (gone["code"], gone["sent"]) == ("service_unreachable", "no"), gone


def pairings(served: Served) -> int:
    with sqlite3.connect(f"file:{served.home.path / 'clankie.db'}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM pairings").fetchone()[0])


def test_h2_pair_web_without_web_origin_exits_2_and_says_how_to_set_it(web: Served):
    """Issue 30: a QR code of http://127.0.0.1:... that no phone can open, with no word."""
    proc, lines = pair_process(web, "--name", "phone")
    assert proc.wait(timeout=30) == 2
    said = "".join(lines.all_lines(10))
    assert "/pair?code=" not in said and "█" not in said and "▀" not in said
    assert "web_origin" in said and "tailscale serve" in said and "--here" in said
    assert pairings(web) == 0  # no code was made


def test_h2_with_web_origin_the_url_is_the_phones_and_needs_no_here(tmp_path: Path):
    origin = "https://laptop.tailnet-name.ts.net"
    served = Served.start(tmp_path / "home", "--web", "127.0.0.1:0",
                          env={"CLANKIE_WEB_ORIGIN": origin})
    try:
        proc, lines = pair_process(served, "--name", "phone")
        try:
            url = lines.until(lambda line: "/pair?code=" in line, 30).strip()
            assert url.startswith(origin + "/pair?code=")
        finally:
            proc.kill()
            proc.wait(timeout=10)
    finally:
        served.stop()


def test_h2_pair_web_without_a_page_says_how_to_serve_it(served: Served):
    done = clankie("devices", "pair", "--web", home=served.home.path)
    assert done.returncode == 1
    assert "clankie serve --web" in done.stderr
    with served.client() as operator:  # no pairing was started
        assert [c for c in operator.call("credential_list")["credentials"]
                if c["kind"] == "device"] == []


def test_h1_serve_web_refuses_a_non_loopback_address(tmp_path: Path):
    assert clankie("init", home=tmp_path / "home").returncode == 0
    done = clankie("serve", "--web", "0.0.0.0:8080", home=tmp_path / "home")
    assert done.returncode == 2
    assert "--web serves only on a loopback address" in done.stderr


def test_h1_the_web_listener_serves_only_the_page_and_the_api_never_the_page(tmp_path: Path):
    served = Served.start(tmp_path / "home", "--web", "127.0.0.1:0")
    try:
        token = served.home.token_file.read_text().strip()
        with httpx.Client(timeout=10) as http:
            on_web = http.post(f"{served.web_url}/v1/ops/conversation_list", json={},
                               headers={"Authorization": f"Bearer {token}"})
            assert on_web.status_code == 400  # the page refuses any bearer token
            on_web = http.post(f"{served.web_url}/v1/ops/conversation_list", json={})
            assert on_web.status_code == 404
            assert http.get(f"{served.tcp_url}/").status_code == 404
            assert http.get(f"{served.tcp_url}/static/page.js").status_code == 404
            assert http.get(f"{served.web_url}/static/page.js").status_code == 200
            # No icon, and no 404 for it in every browser console (new-user trial).
            icon = http.get(f"{served.web_url}/favicon.ico")
            assert (icon.status_code, icon.content) == (204, b"")
    finally:
        served.stop()


def test_pair_without_a_name_or_web_is_a_usage_error(tmp_path: Path):
    done = clankie("devices", "pair", home=tmp_path / "nowhere")
    assert done.returncode == 2
    assert "give the device a NAME (or pair a browser with --web)" in done.stderr
