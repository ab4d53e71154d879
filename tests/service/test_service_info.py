"""`service_info` (SPEC section 10): what the service is and runs with, for any reader, and
never a key or a token: not the caller's, not the model's, not one hidden in a setting."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from clankie import __version__
from clankie.agent.providers import model_in_use
from clankie.agent.sdk import DEFAULT_URLS, base_url, endpoint_digest, endpoint_host
from clankie.settings import SETTINGS, Settings
from tests.world import T0, World

SECRET = "sk-SECRET-in-a-url-0123456789"


@pytest.fixture
def openai_world(tmp_path: Path):
    settings = Settings(
        model="openai", openai_model="llama3.2",
        openai_base_url=f"http://user:{SECRET}@127.0.0.1:11434/v1/{SECRET}?api-key={SECRET}",
        notify_command=("curl", "-H", f"Authorization: Bearer {SECRET}", "https://ntfy.sh/x"))
    w = World.create(tmp_path, settings)
    try:
        yield w
    finally:
        w.close()


def readers(world: World) -> dict[str, str]:
    control = world.call("device_pair", {"name": "phone", "mode": "control"})["token"]
    world.call("device_take_control", {}, control)
    return {
        "operator": world.operator,
        "control": control,
        "read_only": world.call("device_pair", {"name": "tv", "mode": "read_only"})["token"],
        "captain": world.call("credential_issue", {"kind": "captain", "name": "cap"})["token"],
    }


def test_service_info_any_reader_gets_version_start_model_and_settings_never_a_token(
        openai_world: World, monkeypatch: pytest.MonkeyPatch):
    world = openai_world
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # key_set: whether it is set here
    tokens = readers(world)
    for kind, token in tokens.items():
        info = world.call("service_info", {}, token)
        text = json.dumps(info)
        assert not any(t in text for t in tokens.values()), kind
        assert SECRET not in text and "clk_" not in text, kind
        assert info["version"] == __version__
        assert datetime.fromisoformat(info["started_at"].replace("Z", "+00:00")) == T0
        assert info["model"] == {"provider": "openai", "model": "llama3.2",
                                 "endpoint_host": "127.0.0.1:11434",
                                 "endpoint_digest": endpoint_digest(
                                     world.service.settings.openai_base_url),
                                 "key_set": False, "streaming": None}
        shown = info["settings"]
        assert shown["model"] == "openai" and shown["openai_model"] == "llama3.2"
        assert shown["notify_command"] == ["curl", "***", "***", "***"]
        assert "openai_base_url" not in shown and "anthropic_base_url" not in shown
        assert set(shown) == {s.name for s in SETTINGS} - {"openai_base_url",
                                                            "anthropic_base_url"}


def test_service_info_the_scripted_model_has_no_name_and_no_endpoint(world: World):
    info = world.call("service_info")
    assert info["model"] == {"provider": "scripted", "model": None, "endpoint_host": None,
                             "endpoint_digest": None, "key_set": None, "streaming": None}


@pytest.mark.parametrize(("url", "host"), [
    ("http://localhost:11434/v1", "localhost:11434"),
    ("https://api.openai.com/v1", "api.openai.com"),
    ("http://[::1]:8080/v1", "[::1]:8080"),
    ("https://key:secret@gateway.example:8443/a/b?token=x", "gateway.example:8443"),
])
def test_service_info_endpoint_host_is_host_and_port_only(url: str, host: str):
    assert endpoint_host(url) == host


def test_service_info_reports_the_url_the_providers_are_made_with():
    """The SDKs' defaults, held once (`agent.sdk`, which the provider modules read)."""
    assert DEFAULT_URLS == {"openai": "https://api.openai.com/v1",
                            "anthropic": "https://api.anthropic.com"}
    assert base_url(Settings(model="anthropic"), "anthropic") == "https://api.anthropic.com"
    assert model_in_use(Settings(model="anthropic")).endpoint_host == "api.anthropic.com"


def test_service_info_the_endpoint_digest_is_never_of_a_password_or_a_key():
    """Red team (issue 18): the digest was of the whole URL, so a reader (a read-only device)
    could test guesses of a password or a `?key=` in it offline against 48 bits of SHA-256."""
    base = "http://127.0.0.1:8080/v1"
    assert endpoint_digest("http://me:hunter2@127.0.0.1:8080/v1?key=1234#x") == \
        endpoint_digest(base)
    assert endpoint_digest("http://127.0.0.1:8080/v1?key=1234") == endpoint_digest(base)
    assert endpoint_digest("http://127.0.0.1:8080") != endpoint_digest(base)
