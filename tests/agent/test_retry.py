"""The retry layer of model calls (SPEC R6), on the SDKs' own exception types: what is
transient, `Retry-After`, the bounds on tries and on the total wait, what each wait
reports, and the injected sleep (nothing here really waits)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from clankie.agent import endpoint, retry
from clankie.agent.retry import Failure, Policy, Sdk, classify, retry_after
from clankie.agent.transcript import ModelError, Waits

NOW = datetime(2026, 12, 1, 5, 0, 0, tzinfo=UTC)
OPENAI = Sdk("openai", openai, "OPENAI_API_KEY", "openai_model", "openai_base_url")
ANTHROPIC = Sdk("anthropic", anthropic, "ANTHROPIC_API_KEY", "anthropic_model",
                "anthropic_base_url")
REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def status(code: int, headers: dict[str, str] | None = None, message: str = "boom",
           sdk: Any = openai) -> Exception:
    body: dict[str, Any] = {"error": {"message": message, "type": "error"}}
    response = httpx2.Response(code, headers=headers or {}, json=body, request=REQUEST)
    if sdk is openai:  # as the OpenAI SDK makes it: the inner object is the body
        body = body["error"]
    exc: Exception = sdk.APIStatusError(f"Error code: {code}", response=response, body=body)
    return exc


def connection(cause: BaseException | None, sdk: Any = openai) -> Exception:
    exc: Exception = sdk.APIConnectionError(request=REQUEST)
    exc.__cause__ = cause
    return exc


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class Harness:
    """Records every wait reported and slept; the sleep moves the clock, never waits."""

    def __init__(self, raises: BaseException | None = None) -> None:
        self.clock = Clock()
        self.reported: list[tuple[str, datetime]] = []
        self.slept: list[float] = []
        self.raises = raises
        self.waits = Waits(on_wait=lambda s, at: self.reported.append((s, at)),
                           sleep=self.sleep, clock=self.clock)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if self.raises is not None:
            raise self.raises
        self.clock.now += timedelta(seconds=seconds)


def plan(*outcomes: Any) -> tuple[Callable[[], Any], list[int]]:
    """An attempt that raises or returns the planned outcomes in turn; counts its tries."""
    tries = [0]

    def attempt() -> Any:
        outcome = outcomes[min(tries[0], len(outcomes) - 1)]
        tries[0] += 1
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
    return attempt, tries


@pytest.mark.parametrize("code", [408, 409, 429, 500, 502, 503, 504, 529])
@pytest.mark.parametrize("sdk", [OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
def test_r6_408_409_429_and_5xx_are_transient(code: int, sdk: Sdk):
    failure = classify(status(code, sdk=sdk.module), sdk, Policy(), lambda: NOW)
    assert failure.transient and failure.what.startswith(str(code))
    assert "boom" not in failure.what  # a wait's words carry no text of the endpoint's


@pytest.mark.parametrize(("code", "words"), [
    (400, "openai: 400 bad request: boom"),
    (401, "openai: 401 unauthorized: check OPENAI_API_KEY: boom"),
    (403, "openai: 403 forbidden: check that OPENAI_API_KEY may use openai_model: boom"),
    (404, "openai: 404 not found: check openai_model and openai_base_url: boom"),
    (422, "openai: 422 unprocessable request: boom")])
def test_r6_other_4xx_fail_at_once_in_words_a_person_can_act_on(code: int, words: str):
    harness = Harness()
    attempt, tries = plan(status(code))
    with pytest.raises(ModelError) as failed:
        retry.call(OPENAI, Policy(), harness.waits, attempt)
    assert str(failed.value) == words
    assert tries == [1] and harness.slept == [] and harness.reported == []


def test_r6_anthropic_401_names_the_key_to_check():
    attempt, _ = plan(status(401, message="invalid x-api-key", sdk=anthropic))
    with pytest.raises(ModelError) as failed:
        retry.call(ANTHROPIC, Policy(), Harness().waits, attempt)
    assert str(failed.value) == ("anthropic: 401 unauthorized: check ANTHROPIC_API_KEY: "
                                 "invalid x-api-key")


def test_r6_connection_failures_and_timeouts_are_transient():
    refused = classify(connection(httpx2.ConnectError("refused")), OPENAI, Policy())
    assert refused.transient and "could not connect" in refused.what
    assert "openai_base_url" in refused.what
    dropped = classify(connection(httpx2.RemoteProtocolError("gone")), OPENAI, Policy())
    assert dropped == Failure("the connection dropped before a reply", True)
    timed_out = classify(openai.APITimeoutError(request=REQUEST), OPENAI, Policy(timeout=7))
    assert timed_out == Failure("no reply within 7 s (model_timeout)", True)
    assert classify(anthropic.APITimeoutError(request=REQUEST), ANTHROPIC, Policy()).transient


def test_r6_the_endpoint_not_yours_refusal_and_malformed_replies_are_not_retried():
    not_yours = endpoint.EndpointNotYours("served by uid 1001, another user of this machine")
    assert not classify(not_yours, OPENAI, Policy()).transient
    wrapped = classify(connection(not_yours), OPENAI, Policy())
    assert wrapped == Failure(str(not_yours), transient=False)
    response = httpx2.Response(200, content=b"<html>", request=REQUEST)
    malformed = openai.APIResponseValidationError(response, b"<html>")
    assert not classify(malformed, OPENAI, Policy()).transient
    assert classify(ValueError("no json"), OPENAI, Policy()) == Failure(
        "unusable reply: ValueError", False)
    no_key = TypeError('Could not resolve authentication method. Expected the api_key ...')
    assert classify(no_key, ANTHROPIC, Policy()) == Failure(
        "no API key: set ANTHROPIC_API_KEY", False)


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"retry-after": "7"}, 7.0),
    ({"retry-after": "1.5"}, 1.5),
    ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
    ({"retry-after": "Tue, 01 Dec 2026 05:00:12 GMT"}, 12.0),
    ({"retry-after": "Tue, 01 Dec 2026 04:59:00 GMT"}, 0.0),  # a date past: at once
    ({"retry-after": "soon"}, None),
    ({"retry-after": "-3"}, None),
    ({"retry-after": "nan"}, None),
    ({}, None)])
def test_r6_retry_after_in_seconds_milliseconds_or_as_an_http_date(
        headers: dict[str, str], seconds: float | None):
    assert retry_after(httpx2.Headers(headers), NOW) == seconds


def test_r6_a_429_with_retry_after_waits_what_it_asked_and_reports_the_wait():
    harness = Harness()
    attempt, tries = plan(status(429, {"retry-after": "7"}), "the reply")
    assert retry.call(OPENAI, Policy(), harness.waits, attempt) == "the reply"
    assert tries == [2] and harness.slept == [7.0]
    assert harness.reported == [("openai: 429 rate limited; try 2 of 5 in 7 s",
                                 NOW + timedelta(seconds=7))]


def test_r6_without_retry_after_the_backoff_is_exponential_with_jitter():
    harness = Harness()
    attempt, tries = plan(status(500, sdk=anthropic), status(503, sdk=anthropic),
                          status(529, sdk=anthropic), connection(None, sdk=anthropic), "ok")
    policy = Policy(retries=4, total_wait=90, initial=1, max_backoff=30, jitter=1)
    assert retry.call(ANTHROPIC, policy, harness.waits, attempt) == "ok"
    assert tries == [5] and len(harness.slept) == 4
    for slept, base in zip(harness.slept, [1, 2, 4, 8], strict=True):
        assert base <= slept <= base + 1
    for i, (_, at) in enumerate(harness.reported):  # each try is due once its wait is over
        due = NOW + timedelta(seconds=sum(harness.slept[:i + 1]))
        assert abs((at - due).total_seconds()) < 0.001
    assert harness.reported[2][0].startswith("anthropic: 529 overloaded; try 4 of 5 in ")


def test_r6_at_most_model_retries_retries_then_it_gives_up_saying_tries_and_seconds():
    harness = Harness()
    attempt, tries = plan(status(429, {"retry-after": "2"}))
    with pytest.raises(ModelError) as failed:
        retry.call(OPENAI, Policy(retries=3, total_wait=90), harness.waits, attempt)
    assert tries == [4] and harness.slept == [2.0, 2.0, 2.0] and len(harness.reported) == 3
    assert str(failed.value) == "openai: 429 rate limited, gave up after 4 tries and 6 s of waiting"


def test_r6_a_retry_after_past_what_is_left_of_model_retry_wait_gives_up_at_once():
    harness = Harness()
    attempt, tries = plan(status(429, {"retry-after": "4"}), status(429, {"retry-after": "30"}))
    with pytest.raises(ModelError) as failed:
        retry.call(OPENAI, Policy(retries=4, total_wait=10), harness.waits, attempt)
    assert tries == [2] and harness.slept == [4.0]
    assert str(failed.value) == ("openai: 429 rate limited, gave up after 2 tries and 4 s of "
                                 "waiting; it asked to wait 30 s, more than the 6 s left of "
                                 "model_retry_wait")


def test_r6_the_backoff_never_waits_past_model_retry_wait_in_all():
    harness = Harness()
    attempt, tries = plan(status(502))
    policy = Policy(retries=10, total_wait=5, initial=2, jitter=0)
    with pytest.raises(ModelError) as failed:
        retry.call(OPENAI, policy, harness.waits, attempt)
    assert harness.slept == [2.0, 3.0]  # 2, then 4 cut to the 3 s left
    assert tries == [3]
    assert str(failed.value) == ("openai: 502 bad gateway, gave up after 3 tries and 5 s of "
                                 "waiting (model_retry_wait is 5 s)")


def test_r6_model_retries_zero_fails_at_the_first_transient_failure():
    harness = Harness()
    attempt, tries = plan(status(503))
    with pytest.raises(ModelError) as failed:
        retry.call(OPENAI, Policy(retries=0), harness.waits, attempt)
    assert tries == [1] and harness.slept == []
    assert str(failed.value) == "openai: 503 unavailable, gave up after 1 try and 0 s of waiting"



def test_r6_a_run_that_timed_out_says_its_waits_as_waits_not_as_the_time_it_took():
    """R6's error in words you can act on: after calls that each ran model_timeout, the
    seconds said are the waits between tries, named so ("over 2 s" read as the whole)."""
    harness = Harness()
    attempt, tries = plan(openai.APITimeoutError(request=REQUEST))
    policy = Policy(retries=1, total_wait=90, timeout=5, initial=2, jitter=0)
    with pytest.raises(ModelError) as failed:
        retry.call(OPENAI, policy, harness.waits, attempt)
    assert tries == [2]
    assert str(failed.value) == ("openai: no reply within 5 s (model_timeout), gave up after "
                                 "2 tries and 2 s of waiting")

def test_r6_a_sleep_that_raises_ends_the_call_with_its_own_exception_and_no_more_tries():
    class Stopped(Exception):
        pass

    harness = Harness(raises=Stopped())
    attempt, tries = plan(status(429, {"retry-after": "7"}), "never")
    with pytest.raises(Stopped):
        retry.call(OPENAI, Policy(), harness.waits, attempt)
    assert tries == [1] and len(harness.reported) == 1  # reported, then the sleep raised


def test_r6_a_call_that_succeeds_at_once_neither_waits_nor_reports():
    harness = Harness()
    attempt, tries = plan("first time")
    assert retry.call(OPENAI, Policy(), harness.waits, attempt) == "first time"
    assert tries == [1] and harness.slept == [] and harness.reported == []


@pytest.mark.parametrize("headers", [{"retry-after-ms": "1e300"},
                                     {"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"},
                                     {"retry-after": "99999999999999999999"}])
def test_r6_an_absurd_retry_after_gives_up_at_once_in_words_not_300_digits(
        headers: dict[str, str]):
    """Red team (issue 18): the error said `it asked to wait 1000...(300 digits) s`."""
    harness = Harness()
    attempt, tries = plan(status(429, headers))
    with pytest.raises(ModelError) as caught:
        retry.call(OPENAI, Policy(), harness.waits, attempt)
    assert str(caught.value) == ("openai: 429 rate limited, gave up after 1 try and 0 s of "
                                 "waiting; it asked to wait over 99,999 s, more than the 90 s "
                                 "left of model_retry_wait")
    assert tries == [1] and harness.slept == []


@pytest.mark.parametrize("value", ["-5", "garbage", "\x00", "1e309", "nan"])
def test_r6_a_negative_or_unreadable_retry_after_falls_back_to_the_bounded_backoff(value: str):
    harness = Harness()
    attempt, tries = plan(status(429, {"retry-after": value}))
    with pytest.raises(ModelError, match="gave up after 5 tries"):
        retry.call(OPENAI, Policy(), harness.waits, attempt)
    assert tries == [5] and 0 < sum(harness.slept) <= 90


@pytest.mark.parametrize("sdk", [OPENAI, ANTHROPIC])
def test_r6_a_redirect_is_not_followed_and_says_where_it_pointed_without_its_secrets(sdk: Sdk):
    """Red team (issue 18): a 3xx failed the run as `307 error`; it is not followed (the SDK
    client would carry the key to the other host), and now the error says so and where."""
    exc = status(307, {"location": "http://u:pw@10.0.0.9:81/v1/chat?key=K\x1b[2J"},
                 sdk=sdk.module)
    failure = classify(exc, sdk, Policy(), lambda: NOW)
    assert not failure.transient
    assert failure.what == (f"307 redirect to http://10.0.0.9:81/v1/chat, not followed (the "
                            f"key would go along): set {sdk.url_setting} to the URL it "
                            "should be")
