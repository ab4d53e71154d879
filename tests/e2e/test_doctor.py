"""`clankie doctor`: all checks pass on a good setup (exit 0); each check fails on its own
broken setup with its line and its fix (exit 1), and `--json` says the same to scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.served import ROOT, Served, clankie
from tests.peers import OtherProgram
from tests.squatter import Squatter, needs_root


@pytest.fixture(scope="module")
def served(shared_served: Served) -> Served:
    """Issue 32: here `served` is the module's one service (tests/e2e/conftest.py), for the
    checks that only read it; a test that stops it, rotates its token or changes its home
    takes `own_served`."""
    return shared_served


def doctor_run(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`clankie doctor --json` for `home`, with `env` and no other CLANKIE_ variable."""
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("CLANKIE_") and k not in ("OPENAI_API_KEY",
                                                          "ANTHROPIC_API_KEY")}
    full.update(CLANKIE_HOME=str(home), PYTHONPATH=str(ROOT / "src"), **env)
    return subprocess.run([sys.executable, "-m", "clankie", "doctor", "--json"], env=full,
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


def doctor(home: Path, **env: str) -> tuple[int, dict[str, dict[str, object]]]:
    done = doctor_run(home, **env)
    return done.returncode, {c["check"]: c for c in json.loads(done.stdout)}


def failing(checks: dict[str, dict[str, object]]) -> set[str]:
    return {name for name, c in checks.items() if not c["ok"]}


def test_a_good_setup_passes_every_check(served: Served):
    code, checks = doctor(served.home.path)
    assert code == 0 and failing(checks) == set(), checks
    assert set(checks) == {"parents", "home", "files", "store", "token", "service", "settings",
                           "model", "git", "agents"}
    assert str(checks["git"]["detail"]).startswith("git version")


def test_p2_doctor_states_the_limit_of_an_agent_credential(served: Served):
    """P2's stated limit, in doctor as in docs/coding-agents.md: an agent credential stops answering
    through MCP only; a program running as the owner's user can read the operator token."""
    _, checks = doctor(served.home.path)
    detail = str(checks["agents"]["detail"])
    assert checks["agents"]["ok"] is True
    assert "through MCP" in detail and "operator token" in detail
    assert "sandbox" in detail and "another user" in detail


def test_a_missing_home(tmp_path: Path):
    code, checks = doctor(tmp_path / "nothing-here")
    assert code == 1 and {"home", "store", "token", "service"} <= failing(checks)
    assert "run `clankie init`" in str(checks["home"]["fix"])


def test_t1_a_home_others_can_look_into_passes_everywhere_with_a_word_in_doctor(
        own_served: Served):
    own_served.home.path.chmod(0o755)  # not writable by others: T1 allows it, like every command
    code, checks = doctor(own_served.home.path)
    assert (code, failing(checks)) == (0, set())
    assert "chmod 700" in str(checks["home"]["detail"])
    assert clankie("conversations", "list", home=own_served.home.path).returncode == 0


def test_t1_a_token_file_others_can_read_is_refused_everywhere(own_served: Served):
    own_served.home.token_file.chmod(0o644)
    code, checks = doctor(own_served.home.path)
    assert code == 1 and "files" in failing(checks)
    assert "can be read by others" in str(checks["files"]["detail"])
    assert checks["files"]["fix"] == f"chmod 600 {own_served.home.token_file}"
    refused = clankie("conversations", "list", home=own_served.home.path)
    assert refused.returncode == 2 and "can be read by others" in refused.stderr


def test_a_stopped_service(own_served: Served):
    own_served.stop()
    code, checks = doctor(own_served.home.path)
    assert (code, failing(checks)) == (1, {"service"})
    assert str(checks["service"]["fix"]).startswith("start it: `clankie serve`")


def test_doctor_nothing_listening_at_clankie_url_says_serve_tcp_there_or_unset_it(
        own_served: Served):
    url = own_served.tcp_url
    assert own_served.stop() == 0
    code, checks = doctor(own_served.home.path, CLANKIE_URL=url)
    assert (code, failing(checks)) == (1, {"service"})
    assert f"nothing listens at CLANKIE_URL={url}" in str(checks["service"]["detail"])
    assert checks["service"]["fix"] == (
        f"start `clankie serve --tcp {url.removeprefix('http://')}` there, or unset "
        "CLANKIE_URL to use the home's socket")


def test_a_rotated_token(own_served: Served):
    old = own_served.home.token_file.read_text().strip()
    with own_served.client() as client:
        client.call("credential_rotate", {})  # the file still holds the old token
    own_served.home.token_file.write_text(old + "\n")
    code, checks = doctor(own_served.home.path)
    assert (code, failing(checks)) == (1, {"service"})
    assert "unauthenticated" in str(checks["service"]["detail"])
    assert "rotated" in str(checks["service"]["fix"])


@pytest.mark.parametrize(("model", "env", "detail"), [
    ("anthropic", {}, "ANTHROPIC_API_KEY is not set"),
    ("openai", {}, "OPENAI_API_KEY is not set"),
    ("openai", {"CLANKIE_OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "nothing answers"),
])
def test_without_a_service_a_model_provider_that_is_not_set_up(
        own_served: Served, model: str, env: dict[str, str], detail: str):
    own_served.stop()
    code, checks = doctor(own_served.home.path, CLANKIE_MODEL=model, **env)
    assert (code, failing(checks)) == (1, {"service", "model"})
    assert detail in str(checks["model"]["detail"])
    assert str(checks["model"]["detail"]).startswith("no service answered; with the settings "
                                                     f"here `clankie serve` would run {model}")


def test_missing_git(served: Served, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    code, checks = doctor(served.home.path, PATH=str(bin_dir))
    assert (code, failing(checks)) == (1, {"git"})


def test_invalid_settings(own_served: Served):
    (own_served.home.path / "settings.toml").write_text("question_ttl = 'soon'\n")
    code, checks = doctor(own_served.home.path)
    assert (code, failing(checks)) == (1, {"settings"})
    assert "question_ttl" in str(checks["settings"]["detail"])


def test_t3_issue31_doctor_warns_about_a_misspelt_variable_once_and_fails_nothing(
        served: Served):
    """Issue 31: `CLANKIE_OPENAI_MODLE` failed the settings line and, with the settings
    then taken as their defaults, the model line too. Now it is one warning on standard
    error, with the nearest setting, and every check passes."""
    done = doctor_run(served.home.path, CLANKIE_OPENAI_MODLE="gpt-4o", CLANKIE_BIN="/x")
    checks = {c["check"]: c for c in json.loads(done.stdout)}
    assert (done.returncode, failing(checks)) == (0, set()), checks
    assert done.stderr.splitlines() == [
        "clankie: warning: CLANKIE_BIN is not a setting; ignored",
        "clankie: warning: CLANKIE_OPENAI_MODLE is not a setting (did you mean "
        "CLANKIE_OPENAI_MODEL?); ignored"]


@needs_root
@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_t2_a_service_that_is_not_yours_fails_the_check_and_gets_no_token(
        served: Served, kind: str):
    with Squatter.unix() if kind == "unix" else Squatter.tcp() as squatter:
        code, checks = doctor(served.home.path, CLANKIE_URL=squatter.url)
    heard = squatter.close()
    assert (code, failing(checks)) == (1, {"service"})
    detail = str(checks["service"]["detail"])
    assert f"the service at {squatter.url} is not yours" in detail
    assert "answers" not in detail and checks["service"]["fix"]
    assert heard.connections == 1 and heard.everything == b"", heard


EVERY_CHECK = {"parents", "home", "files", "store", "token", "service", "settings", "model",
               "git", "agents"}


@pytest.mark.parametrize("url", ["http://::1:18901", "http://[::1]:abc", "http://127.0.0.1"])
def test_doctor_a_malformed_clankie_url_fails_the_service_line_alone_and_shows_every_check(
        served: Served, url: str):
    code, checks = doctor(served.home.path, CLANKIE_URL=url)
    assert set(checks) == EVERY_CHECK
    assert (code, failing(checks)) == (1, {"service"})
    assert repr(url) in str(checks["service"]["detail"])
    assert "http://HOST:PORT" in str(checks["service"]["detail"])
    assert "internal error" not in str(checks["service"]["detail"])
    plain = subprocess.run([sys.executable, "-m", "clankie", "doctor"], capture_output=True,
                           text=True, timeout=60, cwd=ROOT,
                           env=dict(os.environ, CLANKIE_HOME=str(served.home.path),
                                    PYTHONPATH=str(ROOT / "src"), CLANKIE_URL=url))
    assert plain.returncode == 1 and "internal error" not in plain.stderr, plain
    shown = {line.split(":")[0].split()[-1] for line in plain.stdout.splitlines()
             if line.startswith(("ok  ", "FAIL"))}
    assert shown == EVERY_CHECK, plain.stdout


def test_doctor_an_uppercase_scheme_in_clankie_url_passes(served: Served):
    code, checks = doctor(served.home.path,
                          CLANKIE_URL=served.tcp_url.replace("http://", "HTTP://"))
    assert (code, failing(checks)) == (0, set()), checks


def test_doctor_another_program_at_clankie_url_fails_the_service_line_with_the_fix(
        served: Served):
    with OtherProgram() as other:
        code, checks = doctor(served.home.path, CLANKIE_URL=other.url)
    assert (code, failing(checks)) == (1, {"service"})
    assert str(checks["service"]["detail"]).startswith(
        f"the service at {other.url} did not answer like clankie (HTTP 501)")
    assert "internal_error" not in str(checks["service"]["detail"])
    assert checks["service"]["fix"] == ("point CLANKIE_URL at clankie's own address (unset: "
                                        "the home's socket)")
