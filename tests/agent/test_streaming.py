"""SPEC section 14 at the model call: both SDK models stream (D1) through the official SDKs
against the fake endpoint speaking each provider's server-sent events, show the reply live
(D2), act on nothing before the end marker, withdraw a retried try (D8), time a stream as
D11 says, fail bad streams at once (D12), log nothing secret (D14) and fall back, or not,
as `model_stream` says (D18). R6 and R7 still hold for a stream."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from clankie.agent import retry, stop
from clankie.agent.anthropic_messages import AnthropicModel
from clankie.agent.openai_chat import OpenAIChatModel
from clankie.agent.transcript import (
    ModelError,
    Text,
    ToolCall,
    Turn,
    Waits,
    reply_words,
)
from tests.agent.test_stop import in_run, stopped_after
from tests.fakes import (
    COMMENT,
    PING,
    Endpoint,
    Reply,
    anthropic_calls,
    anthropic_reply,
    error_reply,
    model_endpoint,
    not_json_at,
    openai_calls,
    openai_reply,
    paced,
    sse,
    stream_dropped,
    stream_error,
    stream_events,
    stream_refused,
    stream_stalled,
    streamed,
    tool_calls_without_call,
)

TURNS = [Turn("user", (Text("hi"),))]
PROVIDERS = ["openai", "anthropic"]


class Recorder:
    """A `Live` that records what it is told; every text piece counts as published."""

    def __init__(self) -> None:
        self.said: list[tuple[str, Any]] = []
        self.shown = 0
        self.modes: list[bool] = []

    @property
    def reply_id(self) -> str | None:
        return None

    def begin(self, attempt: int = 1) -> None:
        self.said.append(("begin", None))
        self.shown = 0

    def text(self, piece: str, block: int) -> None:
        self.said.append(("text", (piece, block)))
        self.shown += len(piece)

    def calling(self, name: str) -> None:
        self.said.append(("calling", name))

    def content(self) -> None:
        self.said.append(("content", None))

    def end(self) -> None:
        self.said.append(("end", None))

    def published(self) -> int:
        return self.shown

    def streaming(self, streams: bool) -> None:
        self.modes.append(streams)

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.said]

    def live_text(self) -> str:
        """The text as the live reply joins it: blocks by one blank line (D2)."""
        blocks: dict[int, str] = {}
        for kind, value in self.said:
            if kind == "begin":
                blocks = {}
            elif kind == "text":
                blocks[value[1]] = blocks.get(value[1], "") + value[0]
        return "\n\n".join(blocks[number] for number in sorted(blocks) if blocks[number])


class Harness:
    """Waits that record each report and never sleep, with a `Recorder` as the live reply."""

    def __init__(self) -> None:
        self.live = Recorder()
        self.reported: list[str] = []
        self.waits = Waits(on_wait=lambda summary, at: self.reported.append(summary),
                           sleep=lambda seconds: None, live=self.live)


def make(provider: str, url: str, **policy: Any) -> Any:
    settings = {"initial": 0.01, "jitter": 0, **policy}
    made = retry.Policy(**settings)
    if provider == "openai":
        return OpenAIChatModel("fake", f"{url}/v1", made)
    return AnthropicModel("fake", url, made)


def text(provider: str, words: str | None) -> Reply:
    return openai_reply(words) if provider == "openai" else anthropic_reply(words)


def calls(provider: str, *made: tuple[str, str, Any], words: str | None = None) -> Reply:
    return (openai_calls if provider == "openai" else anthropic_calls)(*made, text=words)


def is_anthropic(provider: str) -> bool:
    return provider == "anthropic"


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with model_endpoint() as found:
        yield found


REPLIES: dict[str, Callable[[str], Reply]] = {
    "text": lambda p: text(p, "Here is a reply of a few words, with a lone \ud800 in it."),
    "calls": lambda p: calls(p, ("c1", "list_files", {}),
                             ("c2", "read_file", {"path": "notes é🙂.txt"})),
    "text and calls": lambda p: calls(p, ("c1", "ask_question", {"kind": "text",
                                                                 "prompt": "Which?"}),
                                      words="Let me ask you."),
    "odd arguments": lambda p: calls(p, ("c1", "read_file", '{"path": "x", ')),
    "empty": lambda p: text(p, None),
}


@pytest.mark.parametrize("shape", sorted(REPLIES))
@pytest.mark.parametrize("provider", PROVIDERS)
def test_d1_r8_a_streamed_reply_gives_the_blocks_the_same_reply_gives_whole(
        endpoint: Endpoint, provider: str, shape: str):
    """D1: the call streams (`stream: true`, no `stream_options`), and what it gives,
    read after its end, is what the same reply gives without streaming (`model_stream =
    "off"`), tool-call fragments joined, never parsed piece by piece."""
    endpoint.plan += [REPLIES[shape](provider), REPLIES[shape](provider)]
    harness = Harness()
    got = make(provider, endpoint.url).step("system", TURNS, [], harness.waits)
    whole = make(provider, endpoint.url, stream="off").step("system", TURNS, [])
    assert got == whole
    first, second = (r["body"] for r in endpoint.requests)
    assert first["stream"] is True and "stream_options" not in first
    assert "stream" not in second
    assert harness.live.live_text() == reply_words(got)  # D2: what was shown is stored
    assert harness.live.kinds()[0] == "begin" and harness.live.kinds()[-1] == "end"
    assert harness.live.modes == [True]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d2_the_reply_is_shown_piece_by_piece_and_each_call_by_its_name_as_it_begins(
        endpoint: Endpoint, provider: str):
    endpoint.plan.append(calls(provider, ("c1", "list_files", {}),
                               ("c2", "ask_question", {"kind": "text", "prompt": "?"}),
                               words="One two three."))
    harness = Harness()
    blocks = make(provider, endpoint.url).step("s", TURNS, [], harness.waits)
    said = harness.live.said
    pieces = [value[0] for kind, value in said if kind == "text"]
    assert pieces == ["One ", "two ", "three."]  # as the fake sends them: word by word
    assert [value for kind, value in said if kind == "calling"] == ["list_files",
                                                                     "ask_question"]
    assert said[-1] == ("end", None)
    assert [b.name for b in blocks if isinstance(b, ToolCall)] == ["list_files",
                                                                   "ask_question"]


def test_d2_anthropic_text_blocks_are_numbered_and_thinking_is_content_never_shown(
        endpoint: Endpoint):
    body = anthropic_reply("First block.").body
    body["content"] = [{"type": "thinking", "thinking": "", "signature": ""},
                       {"type": "text", "text": "First block."},
                       {"type": "text", "text": "Second."}]
    events = stream_events(Reply(body=body), anthropic=True)
    thinking = sse({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "thinking_delta", "thinking": "secret thoughts"}},
                   "content_block_delta")
    events.insert(3, thinking)  # after message_start, ping and the thinking block's start
    endpoint.plan.append(Reply(events=events))
    harness = Harness()
    blocks = make("anthropic", endpoint.url).step("s", TURNS, [], harness.waits)
    assert blocks == [Text("First block."), Text("Second.")]
    assert harness.live.live_text() == "First block.\n\nSecond." == reply_words(blocks)
    assert ("content", None) in harness.live.said
    assert "secret" not in repr(harness.live.said)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d8_r6_a_stream_that_drops_mid_body_is_tried_again_and_its_text_withdrawn(
        endpoint: Endpoint, provider: str):
    """The connection drops after some text and a call's first fragment: nothing of it is
    returned, the next try starts a new live reply, and the wait's summary says how many
    characters were withdrawn."""
    first = calls(provider, ("c1", "list_files", {}), words="Words that will be withdrawn.")
    endpoint.plan += [stream_dropped(first, is_anthropic(provider), after=6),
                      text(provider, "Second try.")]
    harness = Harness()
    blocks = make(provider, endpoint.url).step("s", TURNS, [], harness.waits)
    assert blocks == [Text("Second try.")]
    assert harness.live.kinds().count("begin") == 2
    [summary] = harness.reported
    assert summary.startswith(f"{provider}: the connection dropped after ")
    assert "characters; they are withdrawn; try 2 of 5 in " in summary
    assert int(summary.split(" after ")[1].split(" ")[0]) > 0
    assert len(summary) <= 200


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d12_a_stream_that_ends_without_its_end_marker_is_a_dropped_connection(
        endpoint: Endpoint, provider: str):
    """The body ends cleanly, but before `finish_reason` / `message_stop`: transient."""
    reply = text(provider, "Cut short.")
    events = [e for e in stream_events(reply, is_anthropic(provider)) if isinstance(e, bytes)]
    endpoint.plan += [Reply(events=events[:-2]), text(provider, "Whole.")]
    harness = Harness()
    assert make(provider, endpoint.url).step("s", TURNS, [], harness.waits) == [Text("Whole.")]
    assert harness.reported[0].startswith(f"{provider}: the connection dropped after 10 "
                                          "characters; they are withdrawn; try 2 of 5")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d11_a_stall_after_content_is_a_timeout_tried_again_pings_and_comments_are_not_content(
        endpoint: Endpoint, provider: str):
    reply = text(provider, "Some words and then silence.")
    endpoint.plan += [stream_stalled(reply, is_anthropic(provider), after=4),
                      text(provider, "Done.")]
    harness = Harness()
    model = make(provider, endpoint.url, timeout=10, stall_timeout=0.6)
    began = time.monotonic()
    assert model.step("s", TURNS, [], harness.waits) == [Text("Done.")]
    assert time.monotonic() - began < 5
    [summary] = harness.reported
    assert summary.startswith(f"{provider}: the model sent nothing for 0.6 s "
                              "(model_stall_timeout) after ")
    assert "withdrawn; try 2 of 5" in summary


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d11_model_timeout_bounds_the_wait_for_the_first_content_not_the_whole_call(
        endpoint: Endpoint, provider: str):
    """Only pings and comments after the headers: no content within `model_timeout` is
    R6's timeout; a slow stream whose pieces keep coming may take longer in all."""
    endpoint.plan += [stream_stalled(text(provider, "x"), is_anthropic(provider), after=1),
                      paced(text(provider, "one two three four five six seven"),
                            is_anthropic(provider), 0.1)]
    harness = Harness()
    model = make(provider, endpoint.url, timeout=0.8, stall_timeout=0.8)
    began = time.monotonic()
    blocks = model.step("s", TURNS, [], harness.waits)
    took = time.monotonic() - began
    assert blocks == [Text("one two three four five six seven")]
    assert harness.reported[0].startswith(f"{provider}: no reply within 0.8 s (model_timeout)"
                                          "; try 2 of 5")  # nothing was shown: no withdrawal
    assert took > 0.8 + 1.0  # the second call took longer than model_timeout, in all


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d11_past_model_stream_limit_the_call_fails_for_good(endpoint: Endpoint,
                                                             provider: str):
    endpoint.plan += [paced(text(provider, "a b c d e f g h i j k l m n o p"),
                            is_anthropic(provider), 0.1), text(provider, "never")]
    with pytest.raises(ModelError) as failed:
        make(provider, endpoint.url, stream_limit=0.7).step("s", TURNS, [], Harness().waits)
    assert str(failed.value) == (f"{provider}: the streamed reply did not end within 0.7 s "
                                 "(model_stream_limit)")
    assert len(endpoint.requests) == 1


BAD = {  # what goes wrong, where (from 1), and the words the error says
    "not json": (lambda p: not_json_at(text(p, "a b c"), is_anthropic(p), 3), 3,
                 "is not JSON"),
    "a list": (lambda p: not_json_at(text(p, "a b c"), is_anthropic(p), 3, sse([1, 2])), 3,
               "not an object"),
}


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("provider", PROVIDERS)
def test_d12_a_chunk_that_is_not_json_or_not_its_shape_fails_at_once_by_kind_and_place(
        endpoint: Endpoint, provider: str, bad: str, caplog: pytest.LogCaptureFixture):
    reply, position, words = BAD[bad]
    endpoint.plan += [reply(provider), text(provider, "never")]
    with caplog.at_level(logging.INFO), pytest.raises(ModelError) as failed:
        make(provider, endpoint.url).step("s", TURNS, [], Harness().waits)
    error = str(failed.value)
    assert error.startswith(f"{provider}: unusable reply: ") and words in error
    assert f"(chunk {position} of the stream)" in error
    assert "not json at all" not in error and "[1, 2]" not in error  # never quoted
    assert len(endpoint.requests) == 1
    logged = [r.getMessage() for r in caplog.records if "malformed" in r.getMessage()]
    assert len(logged) == 1 and f"at chunk {position} (" in logged[0]  # D14: once
    assert "not json at all" not in logged[0]


def test_d12_a_delta_for_a_tool_call_index_that_never_started_fails_at_once(
        endpoint: Endpoint):
    head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    fragment = {**head, "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 3, "function": {"arguments": "{}"}}]}, "finish_reason": None}]}
    endpoint.plan.append(Reply(events=[sse(fragment)]))
    with pytest.raises(ModelError, match=r"a fragment of tool call 3, which never started "
                                         r"\(chunk 1 of the stream\)"):
        make("openai", endpoint.url).step("s", TURNS, [], Harness().waits)


def test_d12_a_delta_for_a_content_block_that_never_started_fails_at_once(
        endpoint: Endpoint):
    events = [e for e in stream_events(anthropic_reply("hi"), True) if isinstance(e, bytes)]
    events.insert(2, sse({"type": "content_block_delta", "index": 7,
                          "delta": {"type": "text_delta", "text": "x"}}, "content_block_delta"))
    endpoint.plan.append(Reply(events=events))
    with pytest.raises(ModelError, match=r"a delta for a content block that never started "
                                         r"\(chunk 3 of the stream\)"):
        make("anthropic", endpoint.url).step("s", TURNS, [], Harness().waits)


def test_d12_unknown_event_and_delta_types_are_skipped(endpoint: Endpoint):
    events = [e for e in stream_events(anthropic_reply("Still fine."), True)
              if isinstance(e, bytes)]
    events[3:3] = [sse({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "a_future_delta", "x": 1}}, "content_block_delta"),
                   sse({"type": "a_future_event", "data": {}}, "a_future_event"), PING,
                   COMMENT]
    endpoint.plan.append(Reply(events=events))
    assert make("anthropic", endpoint.url).step("s", TURNS, [], Harness().waits) == [
        Text("Still fine.")]


def test_d12_a_chat_stream_ending_in_tool_calls_without_a_call_names_the_fix(
        endpoint: Endpoint):
    endpoint.plan += [tool_calls_without_call(), openai_reply("never")]
    with pytest.raises(ModelError) as failed:
        make("openai", endpoint.url).step("s", TURNS, [], Harness().waits)
    assert 'finish_reason "tool_calls" and no tool call' in str(failed.value)
    assert 'set model_stream = "off"' in str(failed.value)
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize(("kind", "words"), [("overloaded_error", "529 overloaded"),
                                             ("api_error", "500 server error"),
                                             ("rate_limit_error", "429 rate limited")])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_d12_an_error_inside_a_200_is_transient_by_its_own_type(
        endpoint: Endpoint, provider: str, kind: str, words: str):
    endpoint.plan += [stream_error(kind, is_anthropic(provider), text(provider, "a b c"), 4),
                      text(provider, "Then fine.")]
    harness = Harness()
    assert make(provider, endpoint.url).step("s", TURNS, [], harness.waits) == [
        Text("Then fine.")]
    assert harness.reported[0].startswith(f"{provider}: {words} (an {kind} in the stream)")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d12_an_error_of_another_type_inside_a_200_fails_at_once(endpoint: Endpoint,
                                                                 provider: str):
    endpoint.plan += [stream_error("invalid_request_error", is_anthropic(provider)),
                      text(provider, "never")]
    with pytest.raises(ModelError, match=r"sent an error in its stream \(invalid_request_"
                                         r"error, chunk 1\)"):
        make(provider, endpoint.url).step("s", TURNS, [], Harness().waits)
    assert len(endpoint.requests) == 1


def test_d12_the_sdks_own_stream_classes_would_misread_an_error_inside_a_200(
        endpoint: Endpoint):
    """Why clankie reads the events itself: the Anthropic SDK raises a mid-stream
    `overloaded_error` as a plain `APIStatusError` with status 200 (so a status-based
    retry would call it not transient), and the OpenAI SDK an `APIError` with no status."""
    endpoint.plan += [stream_error("overloaded_error", True),
                      stream_error("overloaded_error", False)]
    client = anthropic.Anthropic(api_key="k", base_url=endpoint.url, max_retries=0,
                                 http_client=httpx2.Client())
    with pytest.raises(anthropic.APIStatusError) as raised:
        list(client.messages.create(model="m", max_tokens=1, stream=True,
                                    messages=[{"role": "user", "content": "hi"}]))
    assert raised.value.status_code == 200
    assert not isinstance(raised.value, anthropic.InternalServerError)
    chat = openai.OpenAI(api_key="k", base_url=f"{endpoint.url}/v1", max_retries=0,
                         http_client=httpx2.Client())
    with pytest.raises(openai.APIError) as said:
        list(chat.chat.completions.create(model="m", stream=True,
                                          messages=[{"role": "user", "content": "hi"}]))
    assert not isinstance(said.value, openai.APIStatusError)


def test_d12_a_reply_past_16_mib_in_all_fails_at_once(endpoint: Endpoint):
    piece = sse({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": "a" * 2**16},
                              "finish_reason": None}]})
    endpoint.plan += [Reply(events=[piece] * (2**24 // len(piece) + 2)), openai_reply("never")]
    with pytest.raises(ModelError, match=f"unusable reply: larger than "
                                         f"{stop.MAX_REPLY_BYTES // 2**20} MiB"):
        make("openai", endpoint.url).step("s", TURNS, [], Harness().waits)
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d14_the_log_carries_no_reply_text_no_arguments_and_no_chunk(
        endpoint: Endpoint, provider: str, caplog: pytest.LogCaptureFixture):
    secret = "SECRET-WORDS"
    first = calls(provider, ("c1", "read_file", {"path": secret}), words=secret)
    endpoint.plan += [stream_dropped(first, is_anthropic(provider), after=5),
                      calls(provider, ("c1", "read_file", {"path": secret}), words=secret),
                      not_json_at(text(provider, secret), is_anthropic(provider), 2,
                                  f"data: {secret}\n\n".encode())]
    model = make(provider, endpoint.url)
    with caplog.at_level(logging.DEBUG):
        model.step("s", TURNS, [], Harness().waits)
        with pytest.raises(ModelError) as failed:
            model.step("s", TURNS, [], Harness().waits)
    assert secret not in caplog.text and secret not in str(failed.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d18_off_calls_as_before_and_shows_the_reply_whole_at_its_end(endpoint: Endpoint,
                                                                      provider: str):
    endpoint.plan.append(calls(provider, ("c1", "list_files", {}), words="All at once."))
    harness = Harness()
    blocks = make(provider, endpoint.url, stream="off").step("s", TURNS, [], harness.waits)
    assert "stream" not in endpoint.requests[0]["body"]
    assert harness.live.said == [("begin", None), ("text", ("All at once.", 0)),
                                 ("calling", "list_files"), ("end", None)]
    assert harness.live.modes[-1] is False and reply_words(blocks) == "All at once."


@pytest.mark.parametrize("status", [400, 404, 405, 415, 422, 501])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_d18_auto_falls_back_for_good_when_the_endpoint_refuses_streaming(
        endpoint: Endpoint, provider: str, status: int, caplog: pytest.LogCaptureFixture):
    endpoint.plan += [stream_refused(status), text(provider, "Whole."), text(provider, "Again.")]
    harness = Harness()
    model = make(provider, endpoint.url)
    with caplog.at_level(logging.INFO):
        assert model.step("s", TURNS, [], harness.waits) == [Text("Whole.")]
        assert model.step("s", TURNS, [], Harness().waits) == [Text("Again.")]
    streamed_asks = [r["body"].get("stream") for r in endpoint.requests]
    assert streamed_asks == [True, None, None]  # the fallback is no R6 try; later calls whole
    assert harness.reported == [] and harness.live.modes[-1] is False
    assert harness.live.live_text() == "Whole."
    said = [r.getMessage() for r in caplog.records if "does not stream" in r.getMessage()]
    assert len(said) == 1 and "model_stream = auto" in said[0]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d18_auto_falls_back_when_the_answer_is_not_an_event_stream(endpoint: Endpoint,
                                                                    provider: str):
    endpoint.plan += [streamed(text(provider, "x"), is_anthropic(provider),
                               content_type="application/json"), text(provider, "Whole.")]
    assert make(provider, endpoint.url).step("s", TURNS, [], Harness().waits) == [
        Text("Whole.")]
    assert [r["body"].get("stream") for r in endpoint.requests] == [True, None]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d18_auto_a_400_to_the_fallback_call_fails_the_run_at_once(endpoint: Endpoint,
                                                                   provider: str):
    endpoint.plan += [error_reply(400, "bad request"), text(provider, "never")]
    model = make(provider, endpoint.url)
    with pytest.raises(ModelError, match=f"^{provider}: 400 bad request: bad request$"):
        model.step("s", TURNS, [], Harness().waits)
    assert [r["body"].get("stream") for r in endpoint.requests] == [True, None]
    endpoint.plan[:] = [text(provider, "Streams still.")]
    model.step("s", TURNS, [], Harness().waits)
    assert endpoint.requests[-1]["body"]["stream"] is True  # not refused for good


@pytest.mark.parametrize("provider", PROVIDERS)
def test_d18_on_a_refusal_fails_the_run_naming_the_setting(endpoint: Endpoint,
                                                           provider: str):
    endpoint.plan += [stream_refused(400), text(provider, "never")]
    with pytest.raises(ModelError) as failed:
        make(provider, endpoint.url, stream="on").step("s", TURNS, [], Harness().waits)
    assert str(failed.value).startswith(f"{provider}: 400 bad request")
    assert "model_stream" in str(failed.value)
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_r7_a_stop_ends_a_stream_in_flight_at_once(endpoint: Endpoint, provider: str):
    endpoint.plan += [stream_stalled(text(provider, "Words, then nothing."),
                                     is_anthropic(provider), after=4), text(provider, "next")]
    model = make(provider, endpoint.url, timeout=30, stall_timeout=30)
    scope = stop.StopScope()
    harness = Harness()
    waits = Waits(on_wait=harness.waits.on_wait, sleep=scope.wait, live=harness.live)
    outcome = in_run(scope, lambda: model.step("s", TURNS, [], waits))
    took = stopped_after(scope, outcome, lambda: harness.live.shown > 0)
    assert isinstance(outcome.get("error"), stop.Stopped | ModelError), outcome
    assert took <= 1.0, f"the stream ended {took:.3f} s after the stop"
    assert model.step("s", TURNS, []) == [Text("next")]


def test_r6_providers_pass_the_stream_settings_to_the_policy(monkeypatch: pytest.MonkeyPatch):
    from clankie.agent import providers
    from clankie.settings import load_settings

    settings = load_settings(None, {"CLANKIE_MODEL": "openai", "CLANKIE_MODEL_STREAM": "off",
                                    "CLANKIE_MODEL_STALL_TIMEOUT": "7",
                                    "CLANKIE_MODEL_STREAM_LIMIT": "300"})
    made = providers._sdk_model(settings)
    policy = made._policy  # type: ignore[attr-defined]
    assert (policy.stream, policy.stall_timeout, policy.stream_limit) == ("off", 7, 300)


class Shown(Recorder):
    def published(self) -> int:
        return 312


def test_d8_the_wait_after_a_try_whose_text_was_published_says_it_is_withdrawn():
    reported: list[str] = []
    live = Shown()
    waits = Waits(on_wait=lambda summary, at: reported.append(summary),
                  sleep=lambda seconds: None, live=live)
    tries = iter([retry.Dropped("gone"), "second"])

    def attempt() -> str:
        outcome = next(tries)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    sdk = retry.Sdk("openai", openai, "OPENAI_API_KEY", "openai_model", "openai_base_url")
    assert retry.call(sdk, retry.Policy(initial=2, jitter=0), waits, attempt,
                      streamed=True) == "second"
    assert reported == ["openai: the connection dropped after 312 characters; they are "
                        "withdrawn; try 2 of 5 in 2 s"]
    assert live.kinds() == ["begin", "begin"]  # each try a new live reply (D2)


def test_d11_the_stream_bounds_are_per_call_and_not_left_behind():
    with stop.streamed(1, 1, 1):
        stop.content()
    assert stop._bounds.get() is None
    stop.content()  # outside a streamed call: nothing
