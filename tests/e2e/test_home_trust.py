"""T1, from the outside: a home that someone else could have changed is refused.

Another local user (`nobody`) plants things the way the bug report did: a home of their
own under a shared folder, files in a home that was world-writable, symlinks to files
the owner cares about, a world-writable folder above the home. Each case is run through
the real CLI (subprocesses) and, where the attack needs it, a real `clankie serve`, and
each must end in exit 2 with one or two plain lines that name the path and the fix, and
with nothing planted used: no hook ran (a marker file), no lock target truncated, no
token file read or sent (nothing connected to a socket the test listens on), no store
created where a link pointed. Planting as `nobody` needs root (CI runs as root); without
it those tests skip and the others (symlinks, modes, parents of one's own) still run.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clankie import dto
from clankie.home import Home
from tests.e2e.served import READY, ROOT, LineReader, Served, ask
from tests.polling import eventually

IS_ROOT = os.geteuid() == 0
as_root = pytest.mark.skipif(not IS_ROOT, reason="planting files as another user (nobody) "
                             "needs root; CI runs as root")
SCRIPT = {"turns": [[{"ask": {"kind": "choice", "prompt": "Tabs or spaces?",
                              "options": [{"label": "tabs"}, {"label": "spaces"}]}}]] * 10}


def nobody() -> tuple[int, int]:
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def give_to_nobody(*paths: Path) -> None:
    uid, gid = nobody()
    for path in paths:
        os.lchown(path, uid, gid)


def environment(home: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLANKIE_")}
    env.update(PYTHONPATH=str(ROOT / "src"), **extra)
    if home is not None:
        env["CLANKIE_HOME"] = str(home)
    return env


def clankie(*args: str, home: Path | None, timeout: float = 60,
            **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clankie", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=environment(home, **extra))


def assert_refused(returncode: int, stderr: str, path: Path, fix: str | None = None) -> None:
    """Exit 2, one or two plain lines, the path named (as a whole word) and a fix."""
    assert returncode == 2, (returncode, stderr)
    assert "Traceback" not in stderr and 1 <= len(stderr.strip().splitlines()) <= 2, stderr
    assert f"{path} " in stderr, (str(path), stderr)
    assert "fix: " in stderr, stderr
    if fix is not None:
        assert fix in stderr, (fix, stderr)


def serve_or_refuse(home: Path, tmp_path: Path) -> tuple[int, str]:
    """`clankie serve` on `home`: its exit code and what it said, when it refuses to start.
    When it serves instead, one question is asked (so that a planted hook would run) and
    it is stopped; the returned code is then -1 and the test fails on it."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    proc = subprocess.Popen([sys.executable, "-m", "clankie", "serve", "--script", str(script)],
                            cwd=ROOT, text=True, env=environment(home),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    reader = LineReader(proc.stderr)
    try:
        reader.until(lambda line: READY.search(line) is not None, 30)
    except AssertionError:  # the pipe closed: it exited (or it hung: killed below)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        assert proc.stderr is not None
        lines = reader.all_lines(10)
        proc.stderr.close()
        return proc.returncode, "".join(lines)
    served = Served(Home(home), proc, "", reader.seen, reader)
    try:
        with served.client() as client:
            conversation = client.op(dto.CONVERSATION_CREATE,
                                     dto.ConversationCreate(workspace=str(tmp_path))).conversation_id
            ask(client, str(conversation))
    finally:
        served.stop()
    return -1, "".join(reader.seen)


def notify_settings(marker: Path) -> str:
    return f'notify_command = ["/usr/bin/touch", "{marker}"]\n'


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    """A Unix socket the test listens on (as CLANKIE_URL): nothing may connect to it."""
    path = tmp_path / "listener.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        sock.listen(8)
        sock.setblocking(False)
        yield f"unix://{path}", sock
    finally:
        sock.close()


def nothing_connected(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


def initialised(tmp_path: Path, name: str = "home") -> Path:
    home = tmp_path / name
    done = clankie("init", home=home)
    assert done.returncode == 0, done.stderr
    return home


# The home itself.

@as_root
def test_t1_a_home_owned_by_another_user_is_refused_and_its_hook_never_runs(tmp_path: Path):
    """The bug report's first case: a stranger's home (here under a folder like /tmp) with
    their settings.toml naming a notify_command; serving it ran that command as root."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    home = initialised(shared)
    marker = tmp_path / "hook-ran"
    (home / "settings.toml").write_text(notify_settings(marker))
    for path in [home, *home.iterdir()]:
        give_to_nobody(path)
    code, said = serve_or_refuse(home, tmp_path)
    assert not marker.exists(), "the stranger's hook ran"
    assert_refused(code, said, home, "CLANKIE_HOME")
    assert "nobody" in said
    for command in (("init",), ("conversations", "list"), ("chat",)):
        done = clankie(*command, home=home)
        assert_refused(done.returncode, done.stderr, home)
    assert not marker.exists()


@as_root
def test_t1_root_init_does_not_take_over_a_home_owned_by_another_user(tmp_path: Path):
    home = tmp_path / "theirs"
    home.mkdir(mode=0o700)
    give_to_nobody(home)
    done = clankie("init", home=home)
    assert_refused(done.returncode, done.stderr, home)
    assert list(home.iterdir()) == [] and home.stat().st_uid == nobody()[0]
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o703])
def test_t1_a_group_or_world_writable_home_is_refused_everywhere(tmp_path: Path, mode: int):
    home = initialised(tmp_path)
    home.chmod(mode)
    for command in (("init",), ("conversations", "list"), ("serve",)):
        done = clankie(*command, home=home, timeout=30)
        assert_refused(done.returncode, done.stderr, home, f"chmod go-w {home}")
    assert stat.S_IMODE(home.stat().st_mode) == mode  # init no longer "fixes" it silently


@as_root
def test_t1_after_chmod_go_w_what_a_stranger_planted_is_still_refused(tmp_path: Path):
    """A world-writable home in which `nobody` wrote settings.toml: refused for the mode;
    after the fix it names, refused for the stranger's file; once that is removed, the
    home serves again."""
    home = initialised(tmp_path)
    home.chmod(0o777)
    marker = tmp_path / "hook-ran"
    planted = home / "settings.toml"
    planted.write_text(notify_settings(marker))
    give_to_nobody(planted)
    code, said = serve_or_refuse(home, tmp_path)
    assert_refused(code, said, home, f"chmod go-w {home}")
    home.chmod(0o700)
    code, said = serve_or_refuse(home, tmp_path)
    assert not marker.exists(), "the planted hook ran"
    assert_refused(code, said, planted, f"remove {planted}")
    assert "nobody" in said
    planted.unlink()
    served = Served.start(home, init=False)
    try:
        with served.client() as client:
            assert client.call("conversation_list")["conversations"] == []
    finally:
        assert served.stop() == 0
    assert not marker.exists()


def test_t1_a_symlinked_home_is_refused(tmp_path: Path):
    real = initialised(tmp_path, "real")
    link = tmp_path / "link"
    link.symlink_to(real)
    done = clankie("conversations", "list", home=link)
    assert_refused(done.returncode, done.stderr, link, str(real))


# The folders above it.

def test_t1_a_world_writable_parent_is_refused_and_nothing_is_created(tmp_path: Path):
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)
    done = clankie("init", home=parent / "home")
    assert_refused(done.returncode, done.stderr, parent, f"chmod go-w {parent}")
    assert list(parent.iterdir()) == []


def test_t1_a_world_writable_parent_of_the_default_home_is_refused(tmp_path: Path):
    data = tmp_path / "xdg"
    data.mkdir()
    data.chmod(0o777)
    done = clankie("init", home=None, XDG_DATA_HOME=str(data))
    assert_refused(done.returncode, done.stderr, data, f"chmod go-w {data}")
    assert list(data.iterdir()) == []
    data.chmod(0o755)
    assert clankie("init", home=None, XDG_DATA_HOME=str(data)).returncode == 0
    assert stat.S_IMODE((data / "clankie").stat().st_mode) == 0o700


@as_root
def test_t1_a_parent_owned_by_another_user_is_refused(tmp_path: Path):
    """Its owner can rename the home away and put their own in its place."""
    parent = tmp_path / "theirs"
    parent.mkdir(mode=0o755)
    give_to_nobody(parent)
    done = clankie("init", home=parent / "home")
    assert_refused(done.returncode, done.stderr, parent)
    assert list(parent.iterdir()) == []


@as_root
def test_t1_a_root_owned_sticky_parent_like_tmp_is_accepted(tmp_path: Path):
    shared = tmp_path / "sticky"
    shared.mkdir()
    shared.chmod(0o1777)
    home = initialised(shared)
    done = clankie("doctor", "--json", home=home)
    checks = {c["check"]: c for c in json.loads(done.stdout)}
    assert checks["parents"]["ok"] and checks["home"]["ok"] and checks["files"]["ok"], checks


# Files in the home.

def test_t1_a_symlinked_lock_is_refused_and_its_target_is_not_truncated(tmp_path: Path):
    home = initialised(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock = home / "serve.lock"
    lock.symlink_to(victim)
    if IS_ROOT:
        give_to_nobody(lock)
    code, said = serve_or_refuse(home, tmp_path)
    assert victim.read_text() == "precious\n"
    assert_refused(code, said, lock, f"remove {lock}")
    assert not (home / "clankie.sock").exists()


def test_t1_a_symlinked_token_file_is_never_read_or_sent(
        tmp_path: Path, listener: tuple[str, socket.socket]):
    url, sock = listener
    home = initialised(tmp_path)
    secret = tmp_path / "private" / "secret.txt"
    secret.parent.mkdir(mode=0o700)
    secret.write_text("clk_the_owners_other_secret\n")
    secret.chmod(0o600)
    token = home / "operator.token"
    token.unlink()
    token.symlink_to(secret)
    if IS_ROOT:
        give_to_nobody(token)
    for command in (("conversations", "list"), ("chat",), ("devices", "list")):
        done = clankie(*command, home=home, timeout=60, CLANKIE_URL=url)
        assert nothing_connected(sock), f"{command} connected to CLANKIE_URL"
        assert "clk_the_owners_other_secret" not in done.stdout + done.stderr
        assert_refused(done.returncode, done.stderr, token, f"remove {token}")
    doctor = clankie("doctor", "--json", home=home, CLANKIE_URL=url)
    assert nothing_connected(sock), "doctor connected to CLANKIE_URL"
    assert "clk_the_owners_other_secret" not in doctor.stdout + doctor.stderr
    checks = {c["check"]: c for c in json.loads(doctor.stdout)}
    assert not checks["files"]["ok"] and str(token) in checks["files"]["detail"]
    assert checks["files"]["fix"].startswith(f"remove {token}")
    assert not checks["service"]["ok"]


def test_t1_a_symlinked_settings_file_is_refused_and_its_hook_never_runs(tmp_path: Path):
    home = initialised(tmp_path)
    marker = tmp_path / "hook-ran"
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(notify_settings(marker))
    settings = home / "settings.toml"
    settings.symlink_to(elsewhere)
    if IS_ROOT:
        give_to_nobody(settings, elsewhere)
    code, said = serve_or_refuse(home, tmp_path)
    assert not marker.exists(), "the hook of a symlinked settings.toml ran"
    assert_refused(code, said, settings, f"remove {settings}")


def test_t1_a_dangling_store_symlink_makes_init_refuse_and_creates_nothing(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    store = home / "clankie.db"
    store.symlink_to(chosen / "planted.db")
    if IS_ROOT:
        give_to_nobody(store)
    done = clankie("init", home=home)
    assert list(chosen.iterdir()) == [], "the store was created where the link pointed"
    assert_refused(done.returncode, done.stderr, store, f"remove {store}")
    assert not (home / "operator.token").exists()


@pytest.mark.parametrize("name", ["clankie.db", "clankie.db-wal", "clankie.sock"])
def test_t1_a_symlinked_store_or_socket_is_refused_by_serve(tmp_path: Path, name: str):
    home = initialised(tmp_path)
    target = tmp_path / f"target-{name}"
    path = home / name
    if path.exists():
        path.rename(target)
    else:
        target.write_bytes(b"")
    path.symlink_to(target)
    before = target.read_bytes()
    code, said = serve_or_refuse(home, tmp_path)
    assert_refused(code, said, path, f"remove {path}")
    assert target.read_bytes() == before


@as_root
def test_t1_a_file_owned_by_another_user_is_refused(tmp_path: Path):
    home = initialised(tmp_path)
    token = home / "operator.token"
    give_to_nobody(token)
    done = clankie("conversations", "list", home=home)
    assert_refused(done.returncode, done.stderr, token, f"remove {token}")
    assert "nobody" in done.stderr


def test_t1_a_group_writable_file_is_refused(tmp_path: Path):
    home = initialised(tmp_path)
    store = home / "clankie.db"
    store.chmod(0o620)
    done = clankie("init", home=home)
    assert_refused(done.returncode, done.stderr, store, f"chmod go-w {store}")


# doctor, and what is not checked.

def test_t1_doctor_shows_the_failing_check_and_its_fix(tmp_path: Path):
    home = initialised(tmp_path)
    home.chmod(0o777)
    (home / "settings.toml").write_text("question_ttl = 'soon'\n")
    done = clankie("doctor", "--json", home=home)
    assert done.returncode == 1, done.stderr
    checks = {c["check"]: c for c in json.loads(done.stdout)}
    assert not checks["home"]["ok"] and checks["home"]["fix"] == f"chmod go-w {home}"
    assert str(home) in checks["home"]["detail"]
    assert checks["parents"]["ok"]
    assert "question_ttl" not in checks["settings"]["detail"]  # not read from such a home
    text = clankie("doctor", home=home)
    assert f"FAIL home: {home} " in text.stdout and f"fix: chmod go-w {home}" in text.stdout


def test_t1_version_does_not_look_at_the_home(tmp_path: Path):
    home = initialised(tmp_path)
    home.chmod(0o777)
    done = clankie("--version", home=home)
    assert done.returncode == 0 and done.stdout.startswith("clankie ")


def test_t1_a_correct_home_serves_and_answers(tmp_path: Path):
    """The checks cost a correct home nothing: init, serve, the CLI and doctor all work."""
    served = Served.start(tmp_path / "home")
    try:
        done = clankie("conversations", "list", home=served.home.path)
        assert done.returncode == 0, done.stderr
        doctor = clankie("doctor", "--json", home=served.home.path)
        checks = {c["check"]: c for c in json.loads(doctor.stdout)}
        assert all(c["ok"] for c in checks.values()), checks
    finally:
        assert served.stop() == 0
    eventually(lambda: not served.home.socket.exists(), "the socket to be removed", timeout=5)
