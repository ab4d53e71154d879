"""`python -m clankie` is the `clankie` command."""

from clankie.cli.entry import main

if __name__ == "__main__":
    raise SystemExit(main())
