"""A real `clankie serve` on a Unix socket: start, use, stop, restart (SPEC section 10, R3)."""

from __future__ import annotations

import os
import re
import resource
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from clankie import dto
from clankie.client import ApiError, Client, ServiceUnreachable, Uncertain
from tests.e2e.served import ROOT, Served, ask, clankie, settle


def test_init_is_idempotent_and_private(tmp_path: Path):
    home = tmp_path / "home"
    first = clankie("init", home=home)
    token = (home / "operator.token").read_text()
    second = clankie("init", home=home)
    assert first.returncode == second.returncode == 0
    assert (home / "operator.token").read_text() == token
    assert "already set up" in second.stdout
    assert stat.S_IMODE((home / "operator.token").stat().st_mode) == 0o600
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    (home / "operator.token").unlink()
    third = clankie("init", home=home)
    assert third.returncode == 0 and (home / "operator.token").read_text() != token


def test_the_socket_is_private_and_a_second_server_is_refused(served: Served):
    assert stat.S_IMODE(served.home.socket.stat().st_mode) == 0o600
    second = clankie("serve", home=served.home.path, timeout=30)
    assert second.returncode == 1
    assert "already serving" in second.stderr and "Traceback" not in second.stderr
    with served.client() as client:
        assert client.call("conversation_list") == {"conversations": [], "next_after": None}


def test_serve_without_init_says_what_to_do(tmp_path: Path):
    """A missing home is a set-up problem (T1's exit 2, the path and the fix); a home
    without a store is the service's refusal to start (exit 1)."""
    result = clankie("serve", home=tmp_path / "empty", timeout=30)
    assert result.returncode == 2 and "clankie init" in result.stderr
    (tmp_path / "empty").mkdir(mode=0o700)
    result = clankie("serve", home=tmp_path / "empty", timeout=30)
    assert result.returncode == 1 and "clankie init" in result.stderr


def test_sigterm_then_restart_cancels_pending_keeps_receipts_and_events(
        served: Served, workspace: Path):
    with served.client() as client:
        c = client.op(dto.CONVERSATION_CREATE,
                      dto.ConversationCreate(workspace=str(workspace))).conversation_id
        first = ask(client, c)
        snap = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
        answered = client.op(dto.INPUT_ANSWER,
                             dto.InputAnswer(conversation_id=c, request_id=first,
                                             incarnation=snap.incarnation, revision=snap.revision,
                                             option_id=snap.pending.options[1].option_id))
        settle(client, c)  # the continuation ran, and asked again
        second = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).pending.request_id
        assert second != first
    assert served.stop(signal.SIGTERM) == 0
    assert not served.home.socket.exists()

    again = Served.start(served.home.path, init=False)
    try:
        with again.client() as client:
            snap = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c, request_id=second))
            assert snap.pending is None
            receipt = snap.request.receipt
            assert (receipt.outcome, receipt.reason) == ("cancelled", "restart")
            kept = client.op(dto.INPUT_GET,
                             dto.InputGet(conversation_id=c, request_id=first)).request.receipt
            assert kept.receipt_id == answered.receipt.receipt_id
            assert kept.continuation == "succeeded"
            events = client.call("events_tail", {"conversation_id": c, "limit": 500})["events"]
            resolved = [e["outcome"] for e in events if e["type"] == "input_resolved"]
            assert resolved == ["answered", "cancelled"]
            duplicate = client.op(dto.INPUT_ANSWER,
                                  dto.InputAnswer(conversation_id=c, request_id=first,
                                                  incarnation=snap.incarnation,
                                                  revision=snap.revision,
                                                  option_id=answered.receipt.answer.option_id))
            assert duplicate.duplicate and duplicate.receipt.run_id == answered.receipt.run_id
    finally:
        assert again.stop(signal.SIGINT) == 0


def test_sigterm_with_a_long_poll_open_stops_cleanly(served: Served, workspace: Path):
    with served.client() as client:
        c = client.op(dto.CONVERSATION_CREATE,
                      dto.ConversationCreate(workspace=str(workspace))).conversation_id
    outcome: list[object] = []
    started = threading.Event()

    def long_poll() -> None:
        with served.client() as client:
            started.set()
            try:
                outcome.append(client.call("events_tail", {"conversation_id": c,
                                                           "wait_ms": 30_000}))
            except (ServiceUnreachable, Uncertain) as exc:  # the stop came first
                outcome.append(exc)

    poller = threading.Thread(target=long_poll)
    poller.start()
    assert started.wait(10)
    assert served.stop(signal.SIGTERM, timeout=15) == 0
    poller.join(timeout=15)
    assert not poller.is_alive() and len(outcome) == 1
    assert not isinstance(outcome[0], dict) or outcome[0]["events"] == []


def test_two_devices_a_leased_device_answers_what_the_operator_displayed(
        served: Served, workspace: Path):
    with served.client() as operator:
        c = operator.op(dto.CONVERSATION_CREATE,
                        dto.ConversationCreate(workspace=str(workspace))).conversation_id
        request_id = ask(operator, c)
        displayed = operator.op(dto.INPUT_GET,
                                dto.InputGet(conversation_id=c))  # the operator's TUI shows this
        phone = operator.op(dto.DEVICE_PAIR, dto.DevicePair(name="phone", mode="control")).token
        tv = operator.op(dto.DEVICE_PAIR, dto.DevicePair(name="tv", mode="read_only")).token
    with served.client(tv) as viewer:
        assert viewer.op(dto.INPUT_GET,
                         dto.InputGet(conversation_id=c)).pending.request_id == request_id
        with pytest.raises(ApiError) as err:
            viewer.op(dto.INPUT_ANSWER,
                      dto.InputAnswer(conversation_id=c, request_id=request_id,
                                      incarnation=displayed.incarnation,
                                      revision=displayed.revision,
                                      option_id=displayed.pending.options[0].option_id))
        assert err.value.code == "forbidden"
    with served.client(phone) as device:
        device.op(dto.DEVICE_TAKE_CONTROL, dto.DeviceTakeControl())
        reply = device.op(dto.INPUT_ANSWER,
                          dto.InputAnswer(conversation_id=c, request_id=request_id,
                                          incarnation=displayed.incarnation,
                                          revision=displayed.revision,
                                          option_id=displayed.pending.options[0].option_id))
        assert reply.receipt.answered_by.kind == "device" and not reply.duplicate


def test_tcp_loopback_serves_the_same_api(served: Served):
    with served.client(url=served.tcp_url) as client:
        assert client.call("conversation_list") == {"conversations": [], "next_after": None}
        assert set(client.openapi()["paths"]) >= {"/v1/ops/input_answer"}


def test_tcp_refuses_a_non_loopback_address(tmp_path: Path):
    clankie("init", home=tmp_path / "h")
    result = clankie("serve", "--tcp", "0.0.0.0:0", home=tmp_path / "h", timeout=30)
    assert result.returncode == 2 and "loopback" in result.stderr


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="this host has no IPv6 loopback (::1)")
def test_cli_serve_on_ipv6_loopback_prints_a_url_clankie_url_takes(tmp_path: Path):
    served = Served.start(tmp_path / "home", "--tcp", "[::1]:0")  # the last --tcp counts
    try:
        assert re.fullmatch(r"http://\[::1\]:\d+", served.tcp_url), served.tcp_url
        with served.client(url=served.tcp_url) as client:
            assert client.call("conversation_list")["conversations"] == []
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize(("given", "said"), [
    ("18900", "HOST:PORT"),
    ("0.0.0.0:18900", "loopback"),
    ("localhost:abc", "1 to 65535"),
    ("localhost:99999", "1 to 65535"),
    ("[::1]:", "1 to 65535"),
])
def test_cli_serve_tcp_that_is_not_a_loopback_host_and_port_is_a_usage_error(
        tmp_path: Path, given: str, said: str):
    """Exit 2 (usage or invalid input) with one sentence that says what --tcp takes, before
    the home or the store is touched: not exit 1, and never an internal error."""
    result = clankie("serve", "--tcp", given, home=tmp_path / "never-made", timeout=30)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr and repr(given) in result.stderr, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "never-made").exists()


def test_cli_serve_on_a_taken_port_says_how_to_see_who_holds_it(tmp_path: Path):
    assert clankie("init", home=tmp_path / "home").returncode == 0
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = clankie("serve", "--tcp", f"127.0.0.1:{port}", home=tmp_path / "home",
                         timeout=30)
    assert result.returncode == 1, result.stderr
    assert f"`ss -ltnp 'sport = :{port}'`" in result.stderr, result.stderr


def test_client_says_when_the_service_is_not_running(tmp_path: Path):
    with Client(f"unix://{tmp_path}/none.sock", "clk_x") as client, \
            pytest.raises(ServiceUnreachable) as err:
        client.call("conversation_list")
    assert "clankie serve" in str(err.value)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_right_after_the_ready_line_still_stops_it(tmp_path: Path, sig: int):
    """The ready line is printed before uvicorn installs its signal handlers; a signal in
    between must not be lost (a script that starts and at once stops the service)."""
    for attempt in range(5):
        served = Served.start(tmp_path / f"home{attempt}")
        served.proc.send_signal(sig)  # at once: no pause after the ready line
        try:
            assert served.proc.wait(timeout=20) == 0
        finally:
            served.stop()


@pytest.mark.parametrize("name,value", [("QUESTION_TTL", "1e20"), ("GIT_TIMEOUT", "nan"),
                                        ("RECEIPT_LIMIT", "1e300"), ("MODEL", "gpt-9")])
def test_t3_serve_with_a_hostile_setting_stops_before_it_touches_the_store(
        tmp_path: Path, name: str, value: str):
    home = tmp_path / "home"
    assert clankie("init", home=home).returncode == 0
    before = (home / "clankie.db").read_bytes()
    done = clankie("serve", home=home, env_extra={f"CLANKIE_{name}": value})
    assert done.returncode == 2, done.stderr
    assert f"setting {name.lower()}" in done.stderr and value in done.stderr
    assert "Traceback" not in done.stderr and not (home / "clankie.sock").exists()
    assert (home / "clankie.db").read_bytes() == before


def test_t3_issue42_a_bad_model_names_where_it_was_given_the_flag_the_variable_or_the_file(
        tmp_path: Path):
    """Issue 42: `serve --model bogus` blamed `CLANKIE_MODEL`, which the owner never set."""
    home = tmp_path / "home"
    assert clankie("init", home=home).returncode == 0
    wanted = "'bogus' is not allowed; it must be one of scripted, openai, anthropic"
    flag = clankie("serve", "--model", "bogus", home=home,
                   env_extra={"CLANKIE_MODEL": "scripted"})  # the flag wins, and is named
    assert flag.returncode == 2, flag.stderr
    assert flag.stderr == f"clankie: setting model given by --model: {wanted}\n" \
        "  fix: correct --model\n"
    variable = clankie("serve", home=home, env_extra={"CLANKIE_MODEL": "bogus"})
    assert variable.returncode == 2
    assert f"setting model in CLANKIE_MODEL: {wanted}" in variable.stderr
    (home / "settings.toml").write_text('model = "bogus"\n')
    (home / "settings.toml").chmod(0o600)
    file = clankie("serve", home=home)
    assert file.returncode == 2
    assert f"setting model in {home / 'settings.toml'}: {wanted}" in file.stderr
    assert "CLANKIE_MODEL" not in file.stderr and "--model" not in file.stderr
    assert not (home / "clankie.sock").exists()


def test_t3_issue31_an_unknown_clankie_variable_is_warned_about_once_and_the_command_goes_on(
        tmp_path: Path):
    """Issue 31: a harness's own `CLANKIE_BIN` and a misspelt setting stopped `init` and
    `serve`; now each is one warning on standard error naming the nearest setting, and the
    command goes on. The variables clankie reads that are not settings are not warned about."""
    home = tmp_path / "home"
    extra = {"CLANKIE_BIN": "/opt/harness/clankie", "CLANKIE_QUESTION_TLL": "60",
             "CLANKIE_URL_TRUSTED": "1", "CLANKIE_AGENT_TOKEN": "x"}
    warned = ["clankie: warning: CLANKIE_BIN is not a setting; ignored\n",
              "clankie: warning: CLANKIE_QUESTION_TLL is not a setting (did you mean "
              "CLANKIE_QUESTION_TTL?); ignored\n"]
    done = clankie("init", home=home, env_extra=extra)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines(keepends=True) == warned
    served = Served.start(home, init=False, env=extra)
    try:
        assert [line for line in served.log if "warning" in line] == warned, served.log
        with served.client() as client:
            info = client.call("service_info")
        assert info["settings"]["question_ttl"] == 86_400
    finally:
        served.stop()


# What the serve path runs in a process of its own: `clankie serve` in the main thread, and a
# thread that waits (with a deadline) for `service_info` over the socket, then prints the
# provider the service reports and every module imported by then, and stops it (SIGTERM).
SERVE_AND_LIST_MODULES = """
import os, signal, sys, threading
from clankie.cli.main import main
from clankie.client import Client, ClientError
from tests.polling import eventually

def info():
    try:
        with Client(timeout=5) as client:
            return client.call("service_info")
    except ClientError:
        return None

def probe():
    said = eventually(info, "service_info", timeout=60, every=0.02)
    print(said["model"]["provider"], *sorted(sys.modules), sep="\\n", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=probe, daemon=True).start()
sys.exit(main(sys.argv[1:]))
"""
ONLY_FOR_RUNS_OR_THE_PAGE = ("openai", "anthropic", "httpx2", "httpcore2", "tenacity",
                             "jinja2", "clankie.web", "clankie.service.executor",
                             "clankie.agent.turn", "clankie.agent.retry",
                             "clankie.agent.openai_chat", "clankie.agent.anthropic_messages",
                             "clankie.agent.probe")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_issue31_serve_answers_service_info_before_it_imports_a_models_sdk_or_the_page(
        tmp_path: Path, provider: str):
    """SPEC section 10: `clankie serve` accepts connections within 1 s of its start, before
    it loads what only a run or the page needs. Timed by bench/cli.py; here, what it has
    imported when it first answers: neither the model's SDK, nor the run executor and its
    HTTP stack, nor the phone page."""
    home = tmp_path / "home"
    assert clankie("init", home=home).returncode == 0
    done = subprocess.run(
        [sys.executable, "-c", SERVE_AND_LIST_MODULES, "serve", "--model", provider, "--web",
         "127.0.0.1:0"], capture_output=True, text=True, timeout=90, cwd=ROOT,
        env=dict(os.environ, CLANKIE_HOME=str(home), PYTHONPATH=f"{ROOT / 'src'}:{ROOT}"))
    assert done.returncode == 0, done.stderr
    said, *modules = done.stdout.splitlines()
    assert said == provider and "clankie.api.app" in modules, done.stdout[:2000]
    assert [m for m in modules if m.split(".")[0] in ONLY_FOR_RUNS_OR_THE_PAGE
            or m.startswith(ONLY_FOR_RUNS_OR_THE_PAGE[6:])] == []


def test_t5_the_log_is_the_owners_alone_visible_and_says_a_flood_once(
        tmp_path: Path, workspace: Path):
    served = Served.start(tmp_path / "home")
    try:
        log = served.home.path / "serve.log"
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        host, port = served.tcp_url.removeprefix("http://").split(":")
        for _ in range(60):  # a stranger's stream of broken requests
            with socket.create_connection((host, int(port)), timeout=5) as peer:
                peer.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
                peer.recv(1024)
        with served.client() as client:
            c = client.op(dto.CONVERSATION_CREATE,
                          dto.ConversationCreate(workspace=str(workspace))).conversation_id
            request = ask(client, c)
            snap = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
            client.op(dto.INPUT_ANSWER,
                      dto.InputAnswer(conversation_id=c, request_id=request,
                                      incarnation=snap.incarnation, revision=snap.revision,
                                      text="my secret preference"))
    finally:
        assert served.stop() == 0
    text = log.read_text()
    token = served.home.token_file.read_text().strip()
    assert "start-up recovery" in text and token not in text
    assert "my secret preference" not in text and "\x1b" not in text
    assert text.count("Invalid HTTP request") == 1, text


def test_t1_t5_a_planted_log_symlink_is_refused_and_its_target_untouched(tmp_path: Path):
    home = tmp_path / "home"
    assert clankie("init", home=home).returncode == 0
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (home / "serve.log").symlink_to(target)
    done = clankie("serve", home=home, timeout=30)
    assert done.returncode == 2 and "serve.log" in done.stderr and "Traceback" not in done.stderr
    assert target.read_text() == "keep me\n"


def test_v5_serve_refuses_a_connection_bound_its_descriptors_cannot_hold(tmp_path: Path):
    home = tmp_path / "home"
    assert clankie("init", home=home).returncode == 0

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))

    done = clankie("serve", "--tcp", "127.0.0.1:0", home=home, timeout=30,
                   preexec_fn=low_limit)
    assert done.returncode == 1, done.stderr
    assert "ulimit -n" in done.stderr and "max_connections" in done.stderr
    served = Served.start(home, init=False, env={"CLANKIE_MAX_CONNECTIONS": "16"},
                          preexec=low_limit)  # a bound that fits is served
    assert served.stop() == 0


def test_t2_serve_on_a_taken_tcp_port_fails_before_start_up_recovery(served: Served,
                                                                     workspace: Path):
    """Someone holding the port while the service was down stops `serve --tcp` before
    recovery has changed anything: the question pending before is still pending."""
    with served.client() as client:
        c = client.op(dto.CONVERSATION_CREATE,
                      dto.ConversationCreate(workspace=str(workspace))).conversation_id
        request_id = ask(client, c)
    assert served.stop() == 0
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = clankie("serve", "--tcp", f"127.0.0.1:{port}", home=served.home.path,
                         timeout=30)
    finally:
        taken.close()
    assert result.returncode == 1, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "recovery" not in result.stderr and "Traceback" not in result.stderr
    assert _status(served.home.store, request_id) == "pending"
    assert not served.home.socket.exists()


def test_a_socket_path_that_cannot_be_bound_fails_before_start_up_recovery(
        served: Served, workspace: Path, tmp_path: Path):
    """The Unix socket is bound before recovery too: a home whose socket path is too long
    for a socket says so, and its pending question stays pending."""
    with served.client() as client:
        c = client.op(dto.CONVERSATION_CREATE,
                      dto.ConversationCreate(workspace=str(workspace))).conversation_id
        request_id = ask(client, c)
    assert served.stop() == 0
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.parent.mkdir()
    served.home.path.rename(deep)
    result = clankie("serve", home=deep, timeout=30)
    assert result.returncode == 1, result.stderr
    assert f"cannot listen on {deep / 'clankie.sock'}" in result.stderr
    assert "recovery" not in result.stderr and "Traceback" not in result.stderr
    assert _status(deep / "clankie.db", request_id) == "pending"


def _status(store_path: Path, request_id: str) -> str:
    store = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)
    try:
        (status,) = store.execute("SELECT status FROM questions WHERE request_id = ?",
                                  (request_id,)).fetchone()
    finally:
        store.close()
    return str(status)


def test_t3_issue31_a_command_that_reads_no_settings_warns_about_a_misspelt_variable_too(
        tmp_path: Path):
    """Issue 31: `CLANKIE_ULR=unix:///x CLANKIE_TOKNE=clk_x clankie conversations list` was
    silent; from a real shell each unknown name is one warning naming the nearest variable
    clankie reads, never its value, and the command goes on (here: no service to reach)."""
    done = clankie("conversations", "list", home=tmp_path / "home",
                   env_extra={"CLANKIE_ULR": "unix:///x", "CLANKIE_TOKNE": "clk_x"})
    warned = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warned == [
        "clankie: warning: CLANKIE_TOKNE is not a setting (did you mean CLANKIE_TOKEN?); "
        "ignored",
        "clankie: warning: CLANKIE_ULR is not a setting (did you mean CLANKIE_URL?); ignored"]
    assert "unix:///x" not in done.stderr and "clk_x" not in done.stderr
    assert "Traceback" not in done.stderr and done.returncode != 0  # nothing listens
