"""Model calls retried (SPEC R6): what failed, whether another try may help, how long to wait.

Owns the one retry policy of both SDK providers. A model call changes nothing (A6: only
an answer is not safe to repeat), so a transient failure is tried again: HTTP 408, 409,
429 and 5xx (Anthropic's 529 included), a connection that could not be made or dropped,
and a call that got no reply within `model_timeout`. Anything else (400, 401, 403, 404
and other 4xx, a reply that cannot be read, the endpoint-not-yours refusal of T4) fails
at once: trying again would only fail again.

A streamed call (SPEC section 14) fails in its own ways too, said here as failures:
`Dropped` (it ended without its end marker: transient), `ErrorEvent` (an `error` inside
an HTTP 200, transient by its own type, D12), `Malformed` (a bad chunk: at once, by kind
and place, never quoting it), D11's `StreamTimeout`s (the first content and every silence
transient, `model_stream_limit` not), and `StreamRefused` (the endpoint does not stream,
D18), which is no failure of the call: it passes through `call` as it is.

Between tries it waits what the endpoint asked (`retry-after-ms`, or `Retry-After` in
seconds or as an HTTP date), else an exponential backoff with jitter; at most
`model_retries` retries and `model_retry_wait` seconds of waiting in all. A wait that
would pass that bound is not started: the call gives up at once and says why. The
machinery is tenacity's; this module only says what to retry, how long to wait, and
when to stop.

Each try starts with `Waits.live.begin(n)` (a new live reply, D2; `n` is its try number
of this call, from 1). Each wait is first
reported through `Waits.on_wait(summary, retry_at)` (the executor appends a `run_activity`
event), saying, when the failed try had published text, that so many characters are
withdrawn (D8); then slept through `Waits.sleep(seconds)`: a sleep that raises (a stopped
run) passes through untouched, and no further try is made. Every failure that ends the
call is a `ModelError` whose text a person can act on.
"""

from __future__ import annotations

import email.utils
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx2
import tenacity

from . import endpoint, stop
from .sdk import public_url
from .transcript import ModelError, Waits, short_error, utc_now

T = TypeVar("T")
log = logging.getLogger(__name__)

TRANSIENT_STATUS = frozenset({408, 409, 429})  # and every 5xx
STATUS_WORDS = {400: "bad request", 401: "unauthorized", 403: "forbidden", 404: "not found",
                408: "request timeout", 409: "conflict", 413: "request too large",
                422: "unprocessable request", 429: "rate limited", 500: "server error",
                502: "bad gateway", 503: "unavailable", 504: "gateway timeout",
                529: "overloaded"}
SAID_CHARS = 200  # of the endpoint's own message, in a run's error


@dataclass(frozen=True, slots=True)
class Policy:
    """The bounds (settings `model_retries`, `model_retry_wait`, `model_timeout`) and the
    backoff: `initial` * 2^(try-1) seconds, at most `max_backoff`, plus up to `jitter`;
    and how calls stream (D11, D18: `model_stall_timeout`, `model_stream_limit`,
    `model_stream`)."""

    retries: int = 4
    total_wait: float = 90.0
    timeout: float = 120.0
    initial: float = 1.0
    max_backoff: float = 30.0
    jitter: float = 1.0
    stall_timeout: float = 60.0
    stream_limit: float = 1_200.0
    stream: str = "auto"  # "auto", "on" or "off"


class StreamRefused(Exception):
    """The endpoint refused a streamed call before any content (`what`, in R6's words), or
    answered it with a body that is not an event stream (D18)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class Dropped(Exception):
    """A stream ended without its end marker (D12): a dropped connection."""


class Malformed(Exception):
    """A stream that is not what its API documents (D12): said by kind and by the chunk's
    number (from 1), never by its content."""

    def __init__(self, kind: str, position: int) -> None:
        super().__init__(f"{kind} (chunk {position} of the stream)")
        self.kind, self.position = kind, position


ERROR_TYPES = {"overloaded_error": 529, "api_error": 500, "rate_limit_error": 429}


class ErrorEvent(Exception):
    """An `error` event or chunk inside an HTTP 200 (D12), with its own `type`."""

    def __init__(self, kind: str, position: int) -> None:
        super().__init__(kind)
        self.kind, self.position = kind, position


DEFAULT_POLICY = Policy()


@dataclass(frozen=True, slots=True)
class Sdk:
    """What the retry layer needs to know of one provider: its name as the errors say it,
    its SDK module (for the exception classes, which both SDKs name alike), and the
    environment variable and settings a person would check."""

    name: str
    module: Any
    key_env: str
    model_setting: str
    url_setting: str


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed try, in words: `what` ("429 rate limited"), whether another try may
    help, and the wait the endpoint asked for, if it did."""

    what: str
    transient: bool
    retry_after: float | None = None


def classify(exc: BaseException, sdk: Sdk, policy: Policy,
             now: Callable[[], datetime] = utc_now) -> Failure:
    """A model call's exception as a `Failure` (see the module's docstring)."""
    refused = endpoint.refusal(exc)
    if refused is not None:
        return Failure(str(refused), transient=False)
    too_large = stop.too_large(exc)
    if too_large is not None:
        return Failure(f"unusable reply: {too_large}", transient=False)
    streamed = _stream_failure(exc, policy)
    if streamed is not None:
        return streamed
    errors = sdk.module
    if isinstance(exc, errors.APITimeoutError):
        return Failure(f"no reply within {_secs(policy.timeout)} s (model_timeout)", True)
    if isinstance(exc, errors.APIConnectionError):
        if isinstance(exc.__cause__, httpx2.ConnectError):
            return Failure("could not connect to the model endpoint: check that it runs and "
                           f"{sdk.url_setting}", True)
        return Failure("the connection dropped before a reply", True)
    if isinstance(exc, errors.APIStatusError):
        status = exc.status_code
        words = f"{status} {STATUS_WORDS.get(status, 'error')}"
        if status in TRANSIENT_STATUS or status >= 500:
            return Failure(words, True, retry_after(exc.response.headers, now()))
        said = _said(exc)
        if 300 <= status < 400:  # not followed: the key and the conversation would go along
            return Failure(f"{status} redirect{_redirected_to(exc)}, not followed (the key "
                           f"would go along): set {sdk.url_setting} to the URL it should be",
                           False)
        hint = {401: f"check {sdk.key_env}",
                403: f"check that {sdk.key_env} may use {sdk.model_setting}",
                404: f"check {sdk.model_setting} and {sdk.url_setting}"}.get(status)
        return Failure(": ".join(part for part in (words, hint, said) if part), False)
    if isinstance(exc, TypeError) and "api_key" in str(exc):  # the SDK found no key
        return Failure(f"no API key: set {sdk.key_env}", False)
    if isinstance(exc, errors.APIError):
        return Failure(f"unusable reply: {short_error(exc)[:SAID_CHARS]}", False)
    return Failure(f"unusable reply: {type(exc).__name__}", False)


def _stream_failure(exc: BaseException, policy: Policy) -> Failure | None:
    """A failure only a streamed call has, in words (see the module's docstring)."""
    timeout = stop.cause(exc, stop.StreamTimeout)
    if timeout is not None:
        if timeout.kind == "limit":
            return Failure(f"the streamed reply did not end within {_secs(timeout.seconds)} s "
                           "(model_stream_limit)", False)
        if timeout.kind == "stall":
            return Failure(f"the model sent nothing for {_secs(timeout.seconds)} s "
                           "(model_stall_timeout)", True)
        return Failure(f"no reply within {_secs(timeout.seconds)} s (model_timeout)", True)
    if isinstance(exc, Dropped) or (isinstance(exc, httpx2.TransportError)
                                     and not isinstance(exc, httpx2.TimeoutException)):
        return Failure("the connection dropped", True)
    if isinstance(exc, httpx2.TimeoutException):
        return Failure(f"no reply within {_secs(policy.timeout)} s (model_timeout)", True)
    if isinstance(exc, Malformed):
        return Failure(f"unusable reply: {exc}", False)
    if isinstance(exc, ErrorEvent):
        status = ERROR_TYPES.get(exc.kind)
        kind = "".join(c for c in exc.kind if c.isprintable())[:40]
        if status is None:
            return Failure(f"the model endpoint sent an error in its stream ({kind}, chunk "
                           f"{exc.position})", False)
        return Failure(f"{status} {STATUS_WORDS[status]} (an {kind} in the stream)", True)
    return None


def _redirected_to(exc: Any) -> str:
    """` to URL` of a redirect's `Location`, without user, query or fragment, bounded."""
    location = exc.response.headers.get("location", "")
    shown = "".join(c for c in public_url(location) if c.isprintable())[:SAID_CHARS]
    return f" to {shown}" if shown else ""


def _said(exc: Any) -> str:
    """The endpoint's own message: `{"error": {"message": ...}}` in both wire formats
    (the OpenAI SDK keeps only the inner object as the error's body)."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not message.strip():
        return ""
    line = " ".join(message.split())
    return line if len(line) <= SAID_CHARS else line[:SAID_CHARS - 3] + "..."


def retry_after(headers: Mapping[str, str], now: datetime) -> float | None:
    """The wait an endpoint asked for, in seconds: `retry-after-ms` (OpenAI's and
    Anthropic's own), else `Retry-After` as seconds or as an HTTP date; None if absent or
    unreadable (then the backoff decides)."""
    ms = _seconds(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _secs(seconds: float) -> str:
    """Seconds as a person reads them: whole ones, tenths below 10 s when not whole; an
    endpoint's absurd ask (`retry-after-ms: 1e300`) as `over 99,999`, not 300 digits."""
    if seconds > 99_999:
        return "over 99,999"
    if seconds >= 10 or float(seconds).is_integer():
        return f"{math.ceil(seconds - 1e-9):d}"
    return f"{math.ceil(seconds * 10 - 1e-9) / 10:g}"


def _tries(count: int) -> str:
    return f"{count} {'try' if count == 1 else 'tries'}"


@dataclass
class _Call:
    """What one call has seen so far, for the decisions and the final words."""

    sdk: Sdk
    policy: Policy
    waits: Waits
    failures: list[Failure] = field(default_factory=list)
    last: BaseException | None = None
    why: str = ""  # why it stopped before the bound on tries
    waited: float = 0.0
    backoff: Callable[[tenacity.RetryCallState], float] = field(init=False)

    def retry(self, state: tenacity.RetryCallState) -> bool:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        if exc is None:
            return False
        self.last = exc
        self.failures.append(classify(exc, self.sdk, self.policy, self.waits.clock))
        if stop.cause(exc, stop.StreamTimeout) is not None:  # D14: a stall by its seconds
            log.info("%s: %s", self.sdk.name, self.failures[-1].what)
        return self.failures[-1].transient

    def __post_init__(self) -> None:
        policy = self.policy
        self.backoff = (tenacity.wait_exponential(multiplier=policy.initial,
                                                  max=policy.max_backoff)
                        + tenacity.wait_random(0, policy.jitter))

    def wait(self, state: tenacity.RetryCallState) -> float:
        asked = self.failures[-1].retry_after
        if asked is not None:
            return asked
        backoff = self.backoff(state)
        return max(0.0, min(backoff, self.policy.total_wait - state.idle_for))

    def stop(self, state: tenacity.RetryCallState) -> bool:
        if state.attempt_number > self.policy.retries:
            return True
        left = self.policy.total_wait - state.idle_for
        if state.upcoming_sleep > left or left <= 0:
            asked = self.failures[-1].retry_after
            self.why = (f"; it asked to wait {_secs(asked)} s, more than the "
                        f"{_secs(max(left, 0))} s left of model_retry_wait"
                        if asked is not None and asked > left
                        else f" (model_retry_wait is {_secs(self.policy.total_wait)} s)")
            return True
        return False

    def before_sleep(self, state: tenacity.RetryCallState) -> None:
        seconds = state.upcoming_sleep
        self.waited += seconds
        shown = self.waits.live.published()
        said = "character; it is" if shown == 1 else "characters; they are"
        withdrawn = f" after {shown:,} {said} withdrawn" if shown > 0 else ""
        summary = (f"{self.sdk.name}: {self.failures[-1].what}{withdrawn}; try "
                   f"{state.attempt_number + 1} of {self.policy.retries + 1} in "
                   f"{_secs(seconds)} s")
        self.waits.on_wait(summary[:200], self.waits.clock() + timedelta(seconds=seconds))

    def error(self) -> ModelError:
        failure = self.failures[-1]
        if not failure.transient:
            return ModelError(f"{self.sdk.name}: {failure.what}")
        return ModelError(f"{self.sdk.name}: {failure.what}, gave up after "
                          f"{_tries(len(self.failures))} and {_secs(self.waited)} s of "
                          f"waiting{self.why}")


def call(sdk: Sdk, policy: Policy, waits: Waits, attempt: Callable[[], T],
         streamed: bool = False) -> T:
    """`attempt()`'s result, tried again on transient failures within the policy's bounds;
    else a `ModelError` saying what failed, how often and for how long. Each try begins a
    live reply (`waits.live.begin(n)`, its try number) and is bounded: in all by
    `model_timeout`, or, when `streamed`, as D11 says (`stop.streamed`). An exception
    raised by `waits.sleep` or `waits.on_wait`, and a `StreamRefused`, pass through as
    they are."""
    state = _Call(sdk, policy, waits)
    retrying = tenacity.Retrying(retry=state.retry, wait=state.wait, stop=state.stop,
                                 before_sleep=state.before_sleep, sleep=waits.sleep,
                                 reraise=True)
    tries = 0

    def bounded() -> T:
        nonlocal tries
        tries += 1
        waits.live.begin(tries)  # R6's try number of this call (D2)
        if streamed:
            with stop.streamed(policy.timeout, policy.stall_timeout, policy.stream_limit):
                return attempt()
        with stop.bounded(policy.timeout):  # the whole call, not each read (R6)
            return attempt()

    try:
        return retrying(bounded)
    except StreamRefused:
        raise
    except Exception as exc:
        if exc is not state.last or not state.failures:
            raise
        raise state.error() from None
