"""The `clankie` command. For now: `clankie demo`; the full CLI arrives with the API."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["demo"]:
        from clankie.demo import run_demo

        return run_demo()
    print("usage: clankie demo", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
