"""The one poll-until helper (issue 20): it returns what it waited for, and past its deadline
fails naming what it waited for and the last value seen, never falling through."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.polling import eventually, eventually_async


def test_eventually_returns_the_first_value_that_holds():
    counter = itertools.count()
    assert eventually(lambda: next(counter), "the third count", until=lambda n: n >= 3) == 3
    assert eventually(lambda: ["x"], "a non-empty list") == ["x"]


def test_eventually_fails_naming_what_it_waited_for_and_the_last_value():
    counter = itertools.count()
    with pytest.raises(AssertionError) as err:
        eventually(lambda: next(counter), "a negative count", timeout=0.05,
                   until=lambda n: n < 0)
    message = str(err.value)
    assert "waiting for a negative count" in message
    assert f"last seen: {next(counter) - 1}" in message


def test_eventually_cuts_a_long_last_value():
    with pytest.raises(AssertionError) as err:
        eventually(lambda: "y" * 10_000, "nothing", timeout=0.01, until=lambda _: False)
    assert str(err.value).endswith("...(cut)") and len(str(err.value)) < 5_200


def test_eventually_async_pauses_with_the_given_pause_and_fails_loudly():
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)
        await asyncio.sleep(seconds)

    async def scenario() -> None:
        counter = itertools.count()
        assert await eventually_async(lambda: next(counter), "two", every=0.001,
                                      until=lambda n: n == 2, pause=pause) == 2
        assert pauses == [0.001, 0.001]
        with pytest.raises(AssertionError, match=r"waiting for never; last seen: False"):
            await eventually_async(lambda: False, "never", timeout=0.02, pause=pause)

    asyncio.run(scenario())
