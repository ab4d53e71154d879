"""SPEC H2: the terminal says what paired, from its user agent, in a few plain words."""

from __future__ import annotations

import pytest

from clankie.useragent import describe

CHROME_ANDROID = ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like "
                  "Gecko) Chrome/156.0.0.0 Mobile Safari/537.36")
SAFARI_IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 "
                 "(KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1")
FIREFOX_LINUX = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0"
EDGE_WINDOWS = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like "
                "Gecko) Chrome/150.0.0.0 Safari/537.36 Edg/150.0.0.0")
CHROME_IOS = ("Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 "
              "(KHTML, like Gecko) CriOS/150.0 Mobile/15E148 Safari/604.1")
SAFARI_MAC = ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, "
              "like Gecko) Version/18.0 Safari/605.1.15")


@pytest.mark.parametrize(("ua", "shown"), [
    (CHROME_ANDROID, "Chrome 156 on Android"),
    (SAFARI_IPHONE, "Safari 18 on iOS"),
    (FIREFOX_LINUX, "Firefox 140 on Linux"),
    (EDGE_WINDOWS, "Edge 150 on Windows"),
    (CHROME_IOS, "Chrome 150 on iOS"),
    (SAFARI_MAC, "Safari 18 on macOS"),
    ("python-httpx/0.28.1", "python-httpx 0.28.1"),
    (None, "an unknown program (it sent no User-Agent)"),
    ("", "an unknown program (it sent no User-Agent)"),
])
def test_h2_a_user_agent_in_a_few_words(ua: str | None, shown: str):
    assert describe(ua) == shown


def test_h2_a_hostile_user_agent_is_shown_escaped_and_cut():
    shown = describe("\x1b]0;owned\x07evil\u202e/1 " + "A" * 500)
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert len(shown) <= 80
