"""Finding the browser for the browser tests (SPEC section 12): Debian's `chromium`, driven
by Playwright for Python with `executable_path` (no browser download, ever).

Without a Chromium the browser tests are skipped, and said loudly at the end of the run
(tests/conftest.py); with `REQUIRE_BROWSER_TESTS=1` (CI sets it) a missing browser fails.
"""

from __future__ import annotations

import os
import shutil

import pytest

SKIPPED: list[str] = []  # why browser tests were skipped, for the run's summary
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str:
    """The Chromium to drive, or skip (fail when REQUIRE_BROWSER_TESTS=1)."""
    given = os.environ.get("CHROMIUM_PATH")
    found = given if given and os.access(given, os.X_OK) else next(
        (path for name in CANDIDATES if (path := shutil.which(name))), None)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        found, why = None, "Playwright for Python is not installed (make .venv/.installed)"
    else:
        why = "no Chromium found (apt-get install chromium, or set CHROMIUM_PATH)"
    if found is not None:
        return found
    if os.environ.get("REQUIRE_BROWSER_TESTS") == "1":
        pytest.fail(f"REQUIRE_BROWSER_TESTS=1 and {why}", pytrace=False)
    SKIPPED.append(why)
    pytest.skip(f"BROWSER TESTS SKIPPED: {why}")
