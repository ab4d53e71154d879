"""The `clankie` command's entry point: `clankie --version` at once, all else to the CLI.

Owns only the split. Exactly `clankie --version` is answered here from `clankie.__version__`
without importing click, httpx, pydantic, textual or the store; every other command line,
shell completion included, is `clankie.cli.main.main`'s. Imports run one way: this module
imports `main` (when it needs it), never the reverse.
"""

from __future__ import annotations

import os
import sys

from clankie.cli import COMPLETE_VAR


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"] and COMPLETE_VAR not in os.environ:
        from clankie import __version__

        sys.stdout.write(f"clankie {__version__}\n")
        return 0
    from clankie.cli.main import main as full

    return full(argv)


if __name__ == "__main__":
    sys.exit(main())
