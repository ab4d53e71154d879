"""The service's log (SPEC T5): where it goes, how it looks, and how often it repeats itself.

Owns logging for `clankie serve`: to standard error and to `$CLANKIE_HOME/serve.log`, a
file only the owner can read (0600, opened without following a symlink and never through
someone else's file); every line with control characters made visible, so text from
others (a hook's output, a path a model chose) cannot act on a terminal that shows the
log; and a message that repeats (a stranger's stream of bad requests) said once, then
counted: the next time it comes after `WINDOW_S`, it says how many times it came meanwhile.
The log never carries a token, a key or an answer's text: nothing logs them.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from clankie.text import visible

WINDOW_S = 60.0
LOG_BYTES = 16 * 1024 * 1024  # a longer log is moved to serve.log.1 when serve starts
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_KEYS = 1_000  # distinct messages remembered for counting
_DIGITS = re.compile(r"\d+")


class LogRefused(Exception):
    """The log file cannot be the owner's own (a symlink, someone else's, not a file)."""


class Visible(logging.Formatter):
    """Each line as the format says, with control characters made visible, and a message
    kept on its one line (a newline in text from others is written `\\n`, so it cannot
    forge a line of the log); a traceback of ours keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return visible(super().formatMessage(record)).replace("\n", "\\n")

    def formatException(self, ei: Any) -> str:
        return visible(super().formatException(ei))


class Repeats(logging.Filter):
    """A message that comes again within `WINDOW_S` is counted, not written; the next time
    it comes after that, it is written with the count."""

    def __init__(self, window: float = WINDOW_S) -> None:
        super().__init__()
        self.window = window
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        decided = getattr(record, "clankie_said", None)  # one decision for every handler
        if decided is None:
            decided = self._decide(record)
            record.clankie_said = decided
        return bool(decided)

    def _decide(self, record: logging.LogRecord) -> bool:
        # Messages that differ only in their numbers are one message ("closed 3 ..." and
        # "closed 4 ..."), so a stranger cannot make each line new by moving a count.
        key = (record.name, record.levelno, _DIGITS.sub("#", record.getMessage()))
        now = time.monotonic()
        said, held = self._seen.get(key, (-self.window - 1, 0))
        if now - said < self.window:
            self._seen[key] = (said, held + 1)
            return False
        if len(self._seen) >= _KEYS:
            self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window}
        self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.getMessage()} (and {held} more like it in the last " \
                         f"{self.window:g} s)"
            record.args = ()
        return True


def setup(log_file: Path, stream: TextIO = sys.stderr) -> None:
    """Log to `stream` and to `log_file` (the owner's alone), visibly and without floods."""
    handlers: list[logging.Handler] = [logging.StreamHandler(stream),
                                       logging.StreamHandler(_private(log_file))]
    repeats = Repeats()
    for handler in handlers:
        handler.setFormatter(Visible(_FORMAT))
        handler.addFilter(repeats)
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True)


def _private(path: Path) -> TextIO:
    """The log file, opened to append: created 0600, never through a symlink, refused when
    it is not the owner's own regular file; moved aside first when it has grown long."""
    try:
        st = os.stat(path, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode) and st.st_size > LOG_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass
    old = os.umask(0o077)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
    except OSError as exc:
        raise LogRefused(f"{path} cannot be opened as the service's log ({exc.strerror}); "
                         f"remove it and start again") from None
    finally:
        os.umask(old)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        raise LogRefused(f"{path} is not the owner's own private file; remove it and start "
                         "again")
    return os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace", buffering=1)
