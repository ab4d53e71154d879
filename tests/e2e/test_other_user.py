"""Another local user stays out: a child running as `nobody` cannot connect to the socket or
read the home, the store, the token file or `settings.toml`; over `--tcp` it is
`unauthenticated` without the owner's token. The home sits in a folder anyone may enter,
and a control file beside it is readable by the child, so every refusal below comes from
clankie's own modes (home 0700, socket, store and token 0600)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.served import Served

SYSTEM_PYTHON = "/usr/bin/python3"  # one that user `nobody` may run
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="running a child as another user needs root (and /usr/bin/python3)")

PROBE = r"""
import http.client, json, os, socket, sys
home, tcp, control = sys.argv[1], sys.argv[2], sys.argv[3]
out = {"uid": os.getuid()}
def attempt(name, fn):
    try:
        fn()
        out[name] = "allowed"
    except OSError as exc:
        out[name] = f"errno {exc.errno}"
out["control"] = open(control).read().strip()
attempt("listdir_home", lambda: os.listdir(home))
for name in ("clankie.db", "operator.token", "settings.toml", "clankie.db-wal"):
    attempt("read_" + name, lambda name=name: open(os.path.join(home, name), "rb").read())
def connect():
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(os.path.join(home, "clankie.sock"))
    finally:
        s.close()
attempt("connect_socket", connect)
host, port = tcp.removeprefix("http://").split(":")
for name, headers in (("tcp_without_token", {}),
                      ("tcp_with_a_guess", {"Authorization": "Bearer clk_guess"})):
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request("POST", "/v1/ops/conversation_list", body="{}", headers=headers)
    reply = c.getresponse()
    out[name] = [reply.status, json.loads(reply.read()).get("code")]
print(json.dumps(out))
"""


@pytest.fixture
def open_folder() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="clankie-other-user-"))
    folder.chmod(0o755)  # anyone may enter: only clankie's own modes keep them out
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def as_nobody() -> None:
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def test_another_local_user_cannot_reach_the_home_socket_store_or_token(open_folder: Path):
    home = open_folder / "home"
    served = Served.start(home)
    try:
        (home / "settings.toml").write_text("question_ttl = 600\n")
        (home / "settings.toml").chmod(0o600)
        control = open_folder / "control.txt"
        control.write_text("readable\n")
        control.chmod(0o644)
        done = subprocess.run([SYSTEM_PYTHON, "-c", PROBE, str(home),
                               served.tcp_url, str(control)], preexec_fn=as_nobody,
                              capture_output=True, text=True, timeout=60, cwd="/",
                              env={"PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert stat_mode(home) == 0o700
        for name in ("clankie.db", "operator.token", "clankie.sock"):
            assert stat_mode(home / name) == 0o600, name
    finally:
        assert served.stop() == 0
    assert seen["uid"] == 65534 and seen["control"] == "readable"
    denied = {k: v for k, v in seen.items() if k.startswith(("listdir", "read", "connect"))}
    assert denied and all(v == "errno 13" for v in denied.values()), denied
    assert seen["tcp_without_token"] == [401, "unauthenticated"]
    assert seen["tcp_with_a_guess"] == [401, "unauthenticated"]


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777
