"""Bench: our own Git parsers against dulwich's, on the same files (issue 41's question).

Owns one measurement, run by hand: should the workspace reader keep its own parsers of
Git's index and pack formats, or hand file objects opened by our confined opener to a
library's (dulwich, not a dependency of clankie: installed apart, e.g.
`pip install --target /tmp/dulwich-bench dulwich` and `DULWICH=/tmp/dulwich-bench`)?
It generates, with Git, in a temporary folder:

- an index of `--entries` paths (default 100,000) in folders four deep, as `git
  update-index` writes it (with a cache-tree made by `git write-tree`);
- a pack of `--versions` commits of one 37 KB text file (default 2,000), a line changed
  in each, repacked with deltas up to 50 deep, as `git gc` would;

and reads each, with the same descriptors, by ours (`gitindex.read_index`,
`gitobjects.ObjectStore.read`, every bound on) and by dulwich (`read_index_dict`;
`Pack.get_raw` on `PackData`/`load_pack_index_file` given file objects), the pack's
versions read newest first (as the history is walked) and in object-ID order (the worst
case for a cache of delta bases). Prints JSON: p50 milliseconds over `--runs` runs and
the peak of Python allocations (tracemalloc) of one run, for each.

    .venv/bin/python bench/parsers.py [--entries 100000] [--versions 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from clankie.workspace.bounds import Bounds
from clankie.workspace.gitfiles import GitDir
from clankie.workspace.gitindex import read_index
from clankie.workspace.gitobjects import ObjectStore

_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
        "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}


def git(cwd: Path, *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          input=input, env=_ENV).stdout


def make_index(top: Path, entries: int) -> None:
    git(top, "init", "-q", "-b", "main")
    blob = git(top, "hash-object", "-w", "--stdin", input=b"same\n").decode().strip()
    lines = "".join(f"100644 {blob}\td{n % 7}/e{n % 11}/f{n % 13}/file-{n:07d}.txt\n"
                    for n in range(entries))
    git(top, "update-index", "--add", "--index-info", input=lines.encode())
    git(top, "write-tree")  # (writes the cache-tree extension into the index)


def make_pack(top: Path, versions: int) -> list[bytes]:
    """A pack of `versions` commits of one file (deltas); the file's blob IDs, newest
    first (the order `git_log` and `git_diff` meet them in)."""
    git(top, "init", "-q", "-b", "main")
    lines = [f"line {n} of a text that changes a little each version\n" for n in range(1200)]
    stream = []
    for version in range(versions):
        lines[(version * 37) % len(lines)] = f"version {version} changed this line\n"
        data = "".join(lines).encode()
        stream.append(b"commit refs/heads/main\ncommitter b <b@example.invalid> %d +0000\n"
                      b"data 2\nv\nM 100644 inline file.txt\ndata %d\n%s\n"
                      % (1_000_000 + version, len(data), data))
    git(top, "fast-import", "--quiet", input=b"".join(stream))
    git(top, "repack", "-a", "-d", "-f", "-q", "--depth=50", "--window=10")
    commits = git(top, "log", "--format=%H").decode().split()
    asked = "".join(f"{commit}:file.txt\n" for commit in commits).encode()
    listed = git(top, "cat-file", "--batch-check", input=asked).decode().split("\n")
    return [bytes.fromhex(line.split()[0]) for line in listed if line]


def p50(fn: Callable[[], object], runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 1)


def peak_kib(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] // 1024
    finally:
        tracemalloc.stop()


def measure(fn: Callable[[], object], runs: int) -> dict[str, float]:
    return {"p50_ms": p50(fn, runs), "peak_kib": peak_kib(fn)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--versions", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if os.environ.get("DULWICH"):
        sys.path.insert(0, os.environ["DULWICH"])
    import dulwich
    from dulwich.index import read_index_dict
    from dulwich.object_format import SHA1
    from dulwich.pack import (
        Pack,
        PackData,
        load_pack_index_file,
    )

    sha1 = SHA1
    with tempfile.TemporaryDirectory(prefix="clankie-parsers-") as scratch:
        top = Path(scratch) / "index"
        top.mkdir()
        make_index(top, args.entries)
        index_path = top / ".git" / "index"

        def ours_index() -> object:
            fd = os.open(index_path, os.O_RDONLY)
            try:
                return read_index(fd, 20, Bounds(60, 1 << 40))
            finally:
                os.close(fd)

        def dulwich_index() -> object:
            with os.fdopen(os.open(index_path, os.O_RDONLY), "rb") as f:
                return read_index_dict(f, sha1)

        packed = Path(scratch) / "pack"
        packed.mkdir()
        oids = make_pack(packed, args.versions)
        stem = next((packed / ".git" / "objects" / "pack").glob("*.pack")).with_suffix("")

        def ours_pack(oids: list[bytes]) -> object:
            gitdir = GitDir(os.open(packed / ".git", os.O_RDONLY | os.O_DIRECTORY))
            store = ObjectStore(gitdir, 20, Bounds(60, 1 << 40))
            try:
                return sum(len(found[1]) for oid in oids
                           if (found := store.read(oid)) is not None)
            finally:
                store.close()
                gitdir.close()

        def dulwich_pack(oids: list[bytes]) -> object:
            with open(f"{stem}.pack", "rb") as data_file, open(f"{stem}.idx", "rb") as idx_file:
                pack = Pack.from_objects(PackData(f"{stem}.pack", sha1, file=data_file),
                                         load_pack_index_file(f"{stem}.idx", idx_file, sha1))
                return sum(len(pack.get_raw(oid)[1]) for oid in oids)

        orders = {"newest_first": oids, "by_id": sorted(oids)}
        assert ours_pack(oids) == dulwich_pack(oids)
        assert len(ours_index()) == len(dulwich_index())
        print(json.dumps({
            "dulwich": ".".join(map(str, dulwich.__version__)),
            "index": {"entries": args.entries, "bytes": index_path.stat().st_size,
                      "ours": measure(ours_index, args.runs),
                      "dulwich": measure(dulwich_index, args.runs)},
            "pack": {"objects": len(oids), "bytes": Path(f"{stem}.pack").stat().st_size,
                     **{order: {"ours": measure(lambda o=asked: ours_pack(o), args.runs),
                                "dulwich": measure(lambda o=asked: dulwich_pack(o),
                                                   args.runs)}
                        for order, asked in orders.items()}},
        }, indent=2))


if __name__ == "__main__":
    main()
