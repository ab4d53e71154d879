"""The service's log (SPEC T5): text from others never forges a line or acts on a terminal,
and a message that repeats, numbers aside, is written once and then counted."""

from __future__ import annotations

import logging

from clankie.api.logs import Repeats, Visible


def record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("clankie.api", logging.WARNING, __file__, 1, message, args, None)


def test_t5_a_newline_or_escape_from_others_never_forges_a_log_line():
    line = Visible("%(levelname)s %(message)s").format(
        record("notify: %s exited 1", "hook\n2026-12-01 INFO clankie.serve: all is well\x1b[2J"))
    assert "\n" not in line and "\x1b" not in line
    assert line == ("WARNING notify: hook\\n2026-12-01 INFO clankie.serve: all is well"
                    "\\x1b[2J exited 1")


def test_t5_messages_that_differ_only_in_numbers_are_counted_not_written():
    repeats = Repeats(window=3600)
    said = [repeats.filter(record("socket serves again; it closed %d connection(s)", n))
            for n in range(50)]
    assert said == [True] + [False] * 49
    assert repeats.filter(record("another message")) is True
