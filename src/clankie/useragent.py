"""What a browser is, in a few words, from its User-Agent (SPEC H2).

Owns turning a User-Agent header into "Chrome 156 on Android" for the terminal that waits
for a pairing, so that a code used by someone else is seen. It reads the few tokens that
name the common browsers and systems, nothing more; anything else shows its first
product token. The header is text from others: what it returns is always escaped
(`clankie.text.visible`) and cut, never the header raw.
"""

from __future__ import annotations

import re
from typing import Final

from clankie.text import visible

SHOWN_MAX: Final = 60  # characters of what is shown, before escaping
# Checked in order: a browser's User-Agent names the ones it is based on too
# (Edge says Chrome and Safari; Chrome says Safari).
_BROWSERS: Final = (("Edg", "Edge"), ("EdgA", "Edge"), ("EdgiOS", "Edge"), ("OPR", "Opera"),
                    ("SamsungBrowser", "Samsung Internet"), ("Firefox", "Firefox"),
                    ("FxiOS", "Firefox"), ("CriOS", "Chrome"),
                    ("HeadlessChrome", "Headless Chrome"), ("Chrome", "Chrome"),
                    ("Chromium", "Chromium"))
_SYSTEMS: Final = (("Android", "Android"), ("iPhone", "iOS"), ("iPad", "iPadOS"),
                   ("CrOS", "ChromeOS"), ("Mac OS X", "macOS"), ("Macintosh", "macOS"),
                   ("Windows", "Windows"), ("Linux", "Linux"))
_PRODUCT: Final = re.compile(r"([^\s/()]+)/([^\s;()]+)")


def describe(user_agent: str | None) -> str:
    """"Chrome 156 on Android", "Safari 18 on iOS", or the first product ("curl 8.5")."""
    if not user_agent or not user_agent.strip():
        return "an unknown program (it sent no User-Agent)"
    products = {name: version for name, version in _PRODUCT.findall(user_agent)}
    browser = next((f"{shown} {_major(products[token])}" for token, shown in _BROWSERS
                    if token in products), None)
    if browser is None and "Safari" in products and "Version" in products:
        browser = f"Safari {_major(products['Version'])}"
    system = next((shown for token, shown in _SYSTEMS if token in user_agent), None)
    if browser is None:
        first = _PRODUCT.search(user_agent)
        browser = f"{first.group(1)} {first.group(2)}" if first else user_agent.strip()
        if first and first.group(1) == "Mozilla":
            browser = "a browser"
    shown = f"{browser} on {system}" if system else browser
    if len(shown) > SHOWN_MAX:
        shown = shown[:SHOWN_MAX - 1] + "…"
    return visible(shown)


def _major(version: str) -> str:
    return version.split(".", 1)[0]
