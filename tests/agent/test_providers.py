"""`agent.providers` (issue 31; SPEC section 10: `clankie serve` accepts connections within
1 s, before it loads what only a run needs): an SDK model is made at the first run, once
however many runs ask at once; a missing SDK still stops `serve` at once, and one that is
installed but cannot be imported fails the run that asked, saying how to fix it."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from clankie.agent import providers
from clankie.agent.context import TurnContext
from clankie.agent.providers import OnFirstRun, ProviderError, model_for_runs
from clankie.agent.transcript import ModelError
from clankie.settings import load_settings

CONTEXT = TurnContext("turn", 0, "/w", (), None)


def test_issue31_the_shared_model_is_made_once_by_the_first_of_many_runs_asking_at_once():
    made: list[object] = []
    inside = threading.Event()
    go_on = threading.Event()

    def make() -> object:
        inside.set()
        assert go_on.wait(10), "the test never let the first make finish"
        made.append(object())
        return made[-1]

    model = OnFirstRun("openai", make)  # type: ignore[arg-type]
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(model(CONTEXT))) for _ in range(8)]
    for thread in threads:
        thread.start()
    assert inside.wait(10), "no run asked for the model"
    go_on.set()
    for thread in threads:
        thread.join(10)
    assert not any(t.is_alive() for t in threads)
    assert len(made) == 1 and got == made * 8


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_issue31_an_sdk_model_is_not_made_nor_its_sdk_imported_until_a_run_asks(
        provider: str, monkeypatch: pytest.MonkeyPatch):
    asked: list[str] = []
    monkeypatch.setattr(providers, "_sdk_model", lambda s: asked.append(s.model) or "model")
    model_for = model_for_runs(load_settings(None, {"CLANKIE_MODEL": provider}))
    assert asked == []
    assert model_for(CONTEXT) == "model" and model_for(CONTEXT) == "model"
    assert asked == [provider]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_issue31_a_missing_sdk_still_stops_serve_at_once_naming_the_extra(
        provider: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, provider, None)  # as if it were not installed
    with pytest.raises(ProviderError, match=rf"the {provider} model needs its SDK, which is "
                                            rf"not installed here: pip install "
                                            rf"'clankie\[{provider}\]'"):
        model_for_runs(load_settings(None, {"CLANKIE_MODEL": provider}))


def test_issue31_an_sdk_that_cannot_be_imported_fails_the_run_that_asked_and_the_next_tries(
        monkeypatch: pytest.MonkeyPatch):
    broken = types.ModuleType("openai")

    def attribute(name: str) -> object:
        raise ImportError(f"cannot import name {name!r} from partially initialized module")

    broken.__getattr__ = attribute  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "openai", broken)
    monkeypatch.setattr(providers, "sdk_installed", lambda provider: True)
    model_for = model_for_runs(load_settings(None, {"CLANKIE_MODEL": "openai"}))
    for _ in range(2):  # nothing kept of a failure: the next run tries again
        with pytest.raises(ModelError, match=r"openai: its SDK cannot be imported \(ImportError"
                                             r": .*\); reinstall it: pip install "
                                             r"'clankie\[openai\]'"):
            model_for(CONTEXT)
