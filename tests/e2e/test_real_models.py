"""Real models, end to end: `service_info` (SPEC section 10) from a real `clankie serve`,
`clankie doctor` checking the model the *running service* uses and asking its endpoint for
its models list (T4's check included), and the "Real models" examples (docs/models.md) run
as written against the fake endpoint, which speaks both SDKs' wire formats (`tests/fakes.py`)."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.served import ROOT, Served, clankie, finished
from tests.e2e.test_doctor import doctor, failing
from tests.fakes import Endpoint, anthropic_reply, model_endpoint, openai_reply
from tests.squatter import Squatter, needs_root

KEYS = {"openai": "sk-RECOGNISABLE-openai-0123456789",
        "anthropic": "sk-ant-RECOGNISABLE-0123456789"}
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def provider_env(provider: str, url: str, key: str | None = None) -> dict[str, str]:
    """The settings and key of `provider` at the fake endpoint `url` (its root)."""
    env = {"openai": {"CLANKIE_OPENAI_BASE_URL": f"{url}/v1",
                      "CLANKIE_OPENAI_MODEL": "fake-gpt"},
           "anthropic": {"CLANKIE_ANTHROPIC_BASE_URL": url,
                         "CLANKIE_ANTHROPIC_MODEL": "fake-claude"}}[provider]
    return env | {KEY_VARIABLES[provider]: key or KEYS[provider]}


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with model_endpoint() as fake:
        yield fake


def serve(tmp_path: Path, provider: str, env: dict[str, str]) -> Served:
    """`clankie serve --model PROVIDER` with `env` (the model is chosen by the flag)."""
    return Served.start(tmp_path / "home", "--model", provider, env=env, script=None)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_service_info_reports_the_model_the_service_runs_with_never_the_key(
        tmp_path: Path, endpoint: Endpoint, provider: str):
    served = serve(tmp_path, provider, provider_env(provider, endpoint.url))
    try:
        with served.client() as client:
            info = client.call("service_info")
        token = served.home.token_file.read_text().strip()
    finally:
        served.stop()
    text = json.dumps(info)
    assert KEYS[provider] not in text and token not in text
    url = endpoint.url + ("/v1" if provider == "openai" else "")
    assert info["model"] == {"provider": provider,
                             "model": "fake-gpt" if provider == "openai" else "fake-claude",
                             "endpoint_host": endpoint.url.removeprefix("http://"),
                             "endpoint_digest": hashlib.sha256(url.encode()).hexdigest()[:12],
                             "key_set": True, "streaming": None}
    assert info["settings"]["model"] == provider  # --model, as the service runs with it
    assert info["version"] and info["started_at"].endswith("Z")



@pytest.mark.parametrize(("provider", "keyed", "said"), [
    ("openai", True, None),
    ("openai", False, "OPENAI_API_KEY is not set here, so a placeholder key is sent"),
    ("anthropic", False, "ANTHROPIC_API_KEY is not set in this environment: runs will fail"),
])
def test_serve_says_its_model_and_endpoint_and_when_its_key_variable_is_not_set(
        tmp_path: Path, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch, provider: str,
        keyed: bool, said: str | None):
    """Keys come only from the environment of `clankie serve` (docs/models.md, "Real models"), and
    doctor asks with its own: the ready line says the model, its endpoint and whether the
    key variable is set, so a serve started in a shell without the key is seen at once."""
    for variable in KEY_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    env = provider_env(provider, endpoint.url)
    if not keyed:
        del env[KEY_VARIABLES[provider]]
    served = serve(tmp_path, provider, env)
    served.stop()
    ready = next(line for line in served.log if "clankie serving on" in line)
    name = "fake-gpt" if provider == "openai" else "fake-claude"
    assert f"with the {provider} model ({name} at {endpoint.url.removeprefix('http://')}" \
        in ready
    assert (said in ready) if said else "not set" not in ready
    assert KEYS[provider] not in "".join(served.log)

CASES = ["good", "wrong_base_url", "bad_key"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_doctor_probes_the_model_endpoint_the_running_service_uses(
        tmp_path: Path, endpoint: Endpoint, provider: str, case: str):
    endpoint.key = KEYS[provider]
    env = provider_env(provider, endpoint.url,
                       key="sk-wrong-key-0000" if case == "bad_key" else None)
    if case == "wrong_base_url":  # the common slip: OpenAI's root without /v1,
        setting = f"CLANKIE_{provider.upper()}_BASE_URL"  # Anthropic's with it
        env[setting] = endpoint.url if provider == "openai" else f"{endpoint.url}/v1"
    served = serve(tmp_path, provider, env)
    try:
        code, checks = doctor(served.home.path, **env)
    finally:
        served.stop()
    model = checks["model"]
    detail, fix = str(model["detail"]), str(model["fix"])
    assert detail.startswith(f"the service at unix://{served.home.socket} runs {provider} "
                             f"(fake-{'gpt' if provider == 'openai' else 'claude'}) at "
                             f"{endpoint.url.removeprefix('http://')}"), detail
    assert endpoint.listed, "the models list was asked"
    assert "sk-wrong-key" not in json.dumps(checks) and KEYS[provider] not in json.dumps(checks)
    if case == "good":
        assert (code, failing(checks)) == (0, set()), checks
        assert detail.endswith("its models list answers (2 models)")
    elif case == "wrong_base_url":
        assert (code, failing(checks)) == (1, {"model"})
        assert "answered HTTP 404" in detail and "the base URL is wrong" in detail
        assert fix.startswith(f"set {provider}_base_url to ")
        assert ("ending in /v1" if provider == "openai" else "without /v1") in fix
    else:
        assert (code, failing(checks)) == (1, {"model"})
        assert "the endpoint refused the key (HTTP 401" in detail
        assert f"set a valid {KEY_VARIABLES[provider]}" in fix


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("endpoint_wants_a_key", [True, False])
def test_doctor_asks_without_a_key_when_the_service_has_none_though_this_shell_has_one(
        tmp_path: Path, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch, provider: str,
        endpoint_wants_a_key: bool):
    """docs/models.md, "Real models": keys come only from the environment of `clankie serve`.
    service_info's key_set says whether the service has the key variable (never the key),
    so doctor asks the endpoint as the service's runs do: a serve started in a shell
    without the key fails doctor with the fix, though doctor's own shell has a good key."""
    for variable in KEY_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    if endpoint_wants_a_key:
        endpoint.key = KEYS[provider]
    env = provider_env(provider, endpoint.url)
    variable = KEY_VARIABLES[provider]
    keyless = {k: v for k, v in env.items() if k != variable}
    served = serve(tmp_path, provider, keyless)
    try:
        with served.client() as client:
            assert client.call("service_info")["model"]["key_set"] is False
        code, checks = doctor(served.home.path, **env)  # this shell has the good key
        listed = [r["headers"] for r in endpoint.listed]
    finally:
        served.stop()
    detail, fix = str(checks["model"]["detail"]), str(checks["model"]["fix"])
    assert all(KEYS[provider] not in json.dumps(h) for h in listed)
    assert bool(listed) == (provider == "openai")  # Anthropic's SDK sends nothing keyless
    if endpoint_wants_a_key:
        assert (code, failing(checks)) == (1, {"model"})
        assert f"the service has no {variable} in its environment" in detail
        assert fix == f"export {variable} in the shell of `clankie serve` and restart it"
    elif provider == "openai":  # a local server without a key: the placeholder will do
        assert (code, failing(checks)) == (0, set()), checks
        assert f"asked without a key, as the service has no {variable}" in detail
    else:  # the Anthropic SDK sends no request without a key: neither would the service
        assert (code, failing(checks)) == (1, {"model"})
        assert f"the service has no {variable} in its environment: every run fails" in detail

def test_doctor_without_the_key_the_service_has_says_to_run_it_with_the_same_key(
        tmp_path: Path, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch):
    """The other way round: the service has OPENAI_API_KEY (key_set), this shell has not,
    and the endpoint refuses a request without it: the fix is doctor's environment, not
    the service's."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    endpoint.key = KEYS["openai"]
    env = provider_env("openai", endpoint.url)
    served = serve(tmp_path, "openai", env)
    try:
        code, checks = doctor(served.home.path, **{k: v for k, v in env.items()
                                                   if k != "OPENAI_API_KEY"})
    finally:
        served.stop()
    assert (code, failing(checks)) == (1, {"model"})
    assert str(checks["model"]["fix"]).startswith(
        "run doctor with the same OPENAI_API_KEY as `clankie serve` (the service has one")

def test_doctor_without_a_service_probes_what_serve_would_use(tmp_path: Path,
                                                              endpoint: Endpoint):
    served = Served.start(tmp_path / "home")
    served.stop()
    env = provider_env("openai", endpoint.url) | {"CLANKIE_MODEL": "openai"}
    code, checks = doctor(served.home.path, **env)
    assert (code, failing(checks)) == (1, {"service"})
    assert checks["model"]["detail"] == (
        "no service answered; with the settings here `clankie serve` would run openai "
        f"(fake-gpt) at {endpoint.url.removeprefix('http://')}: its models list answers "
        "(2 models)")


def test_doctor_reports_the_services_scripted_model_not_the_settings_here(served: Served):
    """The issue's case turned round: the settings here say openai, the service runs the
    scripted model; doctor says what the service runs, and that the settings differ."""
    code, checks = doctor(served.home.path, CLANKIE_MODEL="openai")
    assert (code, failing(checks)) == (0, set()), checks
    assert checks["model"]["detail"] == (
        f"the service at unix://{served.home.socket} runs scripted (offline) (the settings "
        "here choose openai: `clankie serve` uses them from its next start)")


def test_t3_issue31_doctor_reports_one_cause_once_a_bad_setting_is_not_a_second_model_failure(
        tmp_path: Path, endpoint: Endpoint):
    """A malformed setting fails the settings line; the model line does not then compare
    the service's endpoint with the defaults (a base URL never set) and fail for that: it
    says it was not checked because of the settings, and names no endpoint of its own."""
    env = provider_env("openai", endpoint.url)
    served = serve(tmp_path, "openai", env)
    try:
        code, checks = doctor(served.home.path, **env, CLANKIE_MODEL="openai",
                              CLANKIE_QUESTION_TTL="soon")
    finally:
        served.stop()
    assert code == 1 and "question_ttl" in str(checks["settings"]["detail"]), checks
    detail = str(checks["model"]["detail"])
    assert "api.openai.com" not in detail and "base URL" not in detail, detail
    assert "not checked: the settings here cannot be read (see the settings line)" in detail
    assert not endpoint.listed


def test_doctor_the_settings_here_name_another_endpoint_than_the_service_uses(
        tmp_path: Path, endpoint: Endpoint):
    env = provider_env("openai", endpoint.url)
    served = serve(tmp_path, "openai", env)
    try:  # doctor in a shell without the base URL: it does not probe the wrong endpoint
        code, checks = doctor(served.home.path, OPENAI_API_KEY=KEYS["openai"],
                              OPENAI_BASE_URL=f"{endpoint.url}/v1")
    finally:
        served.stop()
    assert (code, failing(checks)) == (1, {"model"})
    detail = str(checks["model"]["detail"])
    assert "but the settings here name api.openai.com: not probed" in detail
    assert "OPENAI_BASE_URL is set here, but clankie does not read it" in detail
    assert "settings.toml" in str(checks["model"]["fix"])
    assert not endpoint.listed


def test_doctor_the_settings_here_name_another_base_url_at_the_same_host(
        tmp_path: Path, endpoint: Endpoint):
    """service_info's endpoint_digest: doctor probes the service's whole base URL or none,
    though the service never says its path."""
    served = serve(tmp_path, "openai", provider_env("openai", endpoint.url))
    try:
        code, checks = doctor(served.home.path, OPENAI_API_KEY=KEYS["openai"],
                              CLANKIE_OPENAI_BASE_URL=endpoint.url)
    finally:
        served.stop()
    assert (code, failing(checks)) == (1, {"model"})
    host = endpoint.url.removeprefix("http://")
    detail = str(checks["model"]["detail"])
    assert f"but the settings here name another base URL at {host}" in detail
    assert detail.endswith(": not probed")
    # The same host:port on both sides: the URL here is shown, so the difference is seen.
    assert f"(here {endpoint.url};" in detail
    assert not endpoint.listed


@needs_root
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_t4_doctor_probes_no_model_endpoint_of_another_user(tmp_path: Path, provider: str):
    """The service's model endpoint port taken by another user: doctor says so with the
    fix, and that listener hears not a byte (no key)."""
    with Squatter.tcp() as squatter:
        env = provider_env(provider, squatter.url)
        served = serve(tmp_path, provider, env)
        try:
            code, checks = doctor(served.home.path, **env)
        finally:
            served.stop()
    heard = squatter.close()
    assert (code, failing(checks)) == (1, {"model"})
    assert "another user of this machine" in str(checks["model"]["detail"])
    assert "stop whoever holds that port" in str(checks["model"]["fix"])
    assert heard.everything == b"", heard


# ------------------------------------------------------- docs/models.md, as written


def readme_examples() -> tuple[list[dict[str, str]], str]:
    """The "Real models" section's `export` blocks (one dict each) and its TOML block, in
    docs/models.md (the README's until issue 42; tests/guides.py reads the blocks)."""
    from tests.guides import blocks

    text = (ROOT / "docs" / "models.md").read_text()
    section = text.split("\n## Real models\n", 1)[1].split("\n## ", 1)[0]
    found = [b.text for b in blocks(ROOT / "docs" / "models.md") if b.text in section]
    exports = [dict(re.findall(r"^export (\w+)=(\S+)$", b, flags=re.MULTILINE))
               for b in found if "export CLANKIE_MODEL=" in b]
    toml = next(b for b in found if b.startswith("model = "))
    return exports, toml


def test_readme_real_models_has_each_provider_and_server():
    exports, toml = readme_examples()
    urls = [e.get("CLANKIE_OPENAI_BASE_URL") for e in exports]
    assert [e["CLANKIE_MODEL"] for e in exports] == ["openai"] * 4 + ["anthropic"]
    assert urls[:4] == [None, "http://localhost:11434/v1", "http://localhost:8000/v1",
                        "http://localhost:8080/v1"]
    assert "OPENAI_API_KEY" in exports[0] and "ANTHROPIC_API_KEY" in exports[4]
    assert tomllib.loads(toml)["openai_base_url"] == "http://localhost:11434/v1"


def _at_fake(value: str, endpoint: Endpoint) -> str:
    return re.sub(r"http://localhost:\d+", endpoint.url, value)


@pytest.mark.parametrize("index", range(5))
def test_readme_real_models_examples_work_as_written(tmp_path: Path, endpoint: Endpoint,
                                                     index: int):
    """Each example's variables, as written, with only `localhost:PORT` moved to the fake
    endpoint (and the public APIs' default base URL pointed at it): `serve` runs with
    them, `doctor` passes, a message reaches the model named there."""
    example = readme_examples()[0][index]
    env = {name: _at_fake(value, endpoint) for name, value in example.items()}
    provider = env["CLANKIE_MODEL"]
    setting = f"CLANKIE_{provider.upper()}_BASE_URL"
    env.setdefault(setting, f"{endpoint.url}/v1" if provider == "openai" else endpoint.url)
    name = env[f"CLANKIE_{provider.upper()}_MODEL"]
    endpoint.models = [name]
    endpoint.key = env.get(KEY_VARIABLES[provider])
    served = Served.start(tmp_path / "home", env=env, script=None)
    try:
        code, checks = doctor(served.home.path, **env)
        assert (code, failing(checks)) == (0, set()), checks
        assert str(checks["model"]["detail"]).endswith("its models list answers (1 model)")
        reply = openai_reply if provider == "openai" else anthropic_reply
        endpoint.plan.append(reply(text="Hello."))
        workspace = tmp_path / "project"
        workspace.mkdir()
        with served.client() as client:
            c = client.call("conversation_create", {"workspace": str(workspace)})
            run = client.call("conversation_send", {"conversation_id": c["conversation_id"],
                                                    "text": "hi"})
            assert finished(client, run["run_id"])["status"] == "succeeded"
    finally:
        served.stop()
    assert endpoint.requests[0]["body"]["model"] == name
    assert endpoint.requests[0]["path"] == ("/v1/chat/completions" if provider == "openai"
                                            else "/v1/messages")


def test_readme_real_models_settings_toml_works_as_written(tmp_path: Path, endpoint: Endpoint):
    toml = _at_fake(readme_examples()[1], endpoint)
    endpoint.models = [tomllib.loads(toml)["openai_model"]]
    home = tmp_path / "home"
    assert clankie("init", home=home).returncode == 0
    (home / "settings.toml").write_text(toml + "\n")
    (home / "settings.toml").chmod(0o600)
    served = Served.start(home, init=False, script=None)
    try:
        code, checks = doctor(home)
    finally:
        served.stop()
    assert (code, failing(checks)) == (0, set()), checks
    assert f"runs openai (llama3.2) at {endpoint.url.removeprefix('http://')}" in str(
        checks["model"]["detail"])
