"""clankie: a local agent service whose agent asks its owner one preference question at a time."""

__version__ = "0.1.0"
