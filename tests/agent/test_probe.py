"""`agent/probe.py`, the models-list question `clankie doctor` asks a model endpoint: the
official SDKs against the fake endpoint on loopback (both wire formats), each outcome in
words a person can act on, and the key never in them (SPEC T4, section 10 `service_info`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from clankie.agent.probe import models_list
from tests.fakes import Endpoint, Reply, error_reply, model_endpoint

KEY = "sk-probe-key-0123456789"
VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    for variable in VARIABLES.values():
        monkeypatch.setenv(variable, KEY)
    with model_endpoint() as fake:
        fake.key = KEY
        yield fake


def root(provider: str, endpoint: Endpoint) -> str:
    return f"{endpoint.url}/v1" if provider == "openai" else endpoint.url


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_doctor_probe_ok_lists_the_models(endpoint: Endpoint, provider: str):
    found = models_list(provider, root(provider, endpoint), 5)
    assert (found.outcome, found.models) == ("ok", ("fake-gpt", "fake-claude"))
    assert endpoint.listed[0]["path"].startswith("/v1/models")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_doctor_probe_wrong_base_url_is_not_found(endpoint: Endpoint, provider: str):
    wrong = endpoint.url if provider == "openai" else f"{endpoint.url}/v1"
    found = models_list(provider, wrong, 5)
    assert found.outcome == "not_found" and found.detail.startswith("HTTP 404")
    assert found.asked.endswith("/models")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_doctor_probe_a_refused_key(endpoint: Endpoint, provider: str,
                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(VARIABLES[provider], "sk-wrong-0123456789")
    found = models_list(provider, root(provider, endpoint), 5)
    assert found.outcome == "bad_key" and found.detail.startswith("HTTP 401")


def test_doctor_probe_an_error_text_that_repeats_the_key_never_says_it(
        endpoint: Endpoint):
    endpoint.models_answer = error_reply(403, f"key {KEY} is not allowed here")
    found = models_list("openai", root("openai", endpoint), 5)
    assert found.outcome == "bad_key"
    assert KEY not in found.detail and "key *** is not allowed" in found.detail


def test_doctor_probe_garbage_and_server_errors(endpoint: Endpoint):
    endpoint.models_answer = Reply(body=b"<html>oops</html>")
    assert models_list("openai", root("openai", endpoint), 5).outcome == "error"
    endpoint.models_answer = error_reply(500, "down")
    found = models_list("anthropic", endpoint.url, 5)
    assert (found.outcome, found.detail) == ("error", "HTTP 500: down")


def test_doctor_probe_nothing_listening_and_a_silent_listener():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    found = models_list("openai", f"http://127.0.0.1:{port}/v1", 5)
    assert found.outcome == "unreachable" and "refused" in found.detail.lower()
    with socket.socket() as silent:  # accepts (the kernel does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        found = models_list("openai", f"http://127.0.0.1:{silent.getsockname()[1]}/v1", 0.5)
    assert (found.outcome, found.detail) == ("timeout", "no answer within 0.5 s")


def test_doctor_probe_anthropic_without_any_key(monkeypatch: pytest.MonkeyPatch):
    for variable in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    with model_endpoint() as fake:
        found = models_list("anthropic", fake.url, 5)
    assert found.outcome == "no_key" and not fake.listed


def test_doctor_probe_an_error_text_that_repeats_the_key_cut_short_never_says_it(
        endpoint: Endpoint):
    """Red team (issue 18): a server echoing all of the key but its last character (or its
    first 12) got it printed by doctor: only the whole key was masked."""
    endpoint.models_answer = error_reply(403, f"key {KEY[:-1]} / {KEY[:12]}... refused")
    found = models_list("openai", root("openai", endpoint), 5)
    assert found.outcome == "bad_key"
    assert KEY[:8] not in found.detail and found.detail.count("***") == 2
