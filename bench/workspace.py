"""Bench of the read-only workspace tools (SPEC W) on a generated Git repository.

Generates (once, in a temporary folder) a repository of 10,000 text files of about 10 KiB
each (about 100 MiB), with ignored build output and a 50 MiB file, then measures in one
run, each figure next to `git grep` run directly on the same tree (and `rg` if present):

- search_text for a rare literal and for a common word (cut at 100 matches),
- list_files at depth 3,
- read_file of a 250-line window in the 50 MiB file,
- git_status and git_diff with 10 changed files, next to `git status` and `git diff`
  (the repository packed by `git gc`, as real ones are, plus 60 later loose commits),
- git_log of 50 commits, next to `git log -n 50`,
- list_files in a second repository of 16,000 Git-ignored folders (SPEC W5: linear),
  next to `git ls-files --others --ignored --exclude-standard --directory`.

Every figure is the median (p50) of several runs of the tool's own function in this
process (no Git program runs: the tools read the repository themselves, SPEC W7); the
baselines are whole `git` processes on the same tree in the same run. `peak_kib` is the
most memory one call held beyond what the process held before it (Linux: the peak is
reset with `/proc/self/clear_refs` first). `target` says each issue-28 target and whether
this run met it. Prints one JSON document.

    .venv/bin/python bench/workspace.py [--files 10000] [--runs 9]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from clankie.tool_dto import GitDiffArgs, GitLogArgs, ListFilesArgs, ReadFileArgs, SearchTextArgs
from clankie.workspace.confine import Refusal, Root, file_id
from clankie.workspace.deny import DenyList
from clankie.workspace.git import git_diff, git_log, git_status
from clankie.workspace.identity import identify
from clankie.workspace.listing import list_files
from clankie.workspace.reading import read_file
from clankie.workspace.search import search_text

WORDS = ["alpha", "beta", "gamma", "delta", "value", "result", "config", "parser", "request",
         "handler", "state", "event", "buffer", "stream", "token", "module", "import", "return",
         "class", "def", "self", "data", "item", "index"]
RARE = "zyzzyva_marker_7731"


# Issue 28's targets: (what it says, whether our p50 and the baseline's p50 meet it)
TARGETS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "git_status_10_changed": ("<= 1.5 x git status + 100 ms", lambda o, g: o <= 1.5 * g + 100),
    "git_diff_10_changed": ("<= 1.5 x git diff + 100 ms", lambda o, g: o <= 1.5 * g + 100),
    "git_log_50_commits": ("<= 50 ms", lambda o, g: o <= 50),
    "search_text_rare_literal": ("<= 1.5 x git grep", lambda o, g: o <= 1.5 * g),
}


def generate(root: Path, files: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    root.mkdir(parents=True)
    (root / ".gitignore").write_text("build/\n*.log\n")
    for number in range(files):
        folder = root / f"pkg{number % 40:02d}" / f"sub{number % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(130)]
        if number == files // 2:
            lines[60] = f"the {RARE} is here"
        (folder / f"file{number:05d}.py").write_text("\n".join(lines) + "\n")
    build = root / "build"
    build.mkdir()
    for number in range(500):
        (build / f"out{number}.o").write_text("alpha " * 100)
    line = " ".join(WORDS) + "\n"
    with open(root / "big.txt", "w") as big:
        big.write(line * (50 * 1024 * 1024 // len(line)))
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example.org",
           "-c", "gc.auto=0"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "generated"], check=True)
    subprocess.run([*git, "gc", "-q"], check=True)  # packed, with deltas, as real ones are
    for number in range(60):  # later history, loose
        touched = root / f"pkg{number % 40:02d}" / "history.txt"
        with open(touched, "a") as out:
            out.write(f"change {number}\n")
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", f"change {number}"], check=True)
    for number in range(0, files, max(1, files // 10))[:10]:  # 10 changed files
        changed = root / f"pkg{number % 40:02d}" / f"sub{number % 7}" / f"file{number:05d}.py"
        with open(changed, "a") as out:
            out.write("one more line\n")


def generate_ignored(root: Path, folders: int = 16_000) -> None:
    root.mkdir(parents=True)
    (root / ".gitignore").write_text("cache-*/\n")
    for number in range(folders):
        (root / f"cache-{number:05d}").mkdir()
    (root / "kept.txt").write_text("kept\n")
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example.org",
           "-c", "gc.auto=0"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "generated"], check=True)


def p50(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def peak_kib(fn: Callable[[], object]) -> int | None:
    """The most memory one call of `fn` held beyond what the process held before it."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        before = _status_kib("VmRSS:")
        fn()
        return _status_kib("VmHWM:") - before
    except OSError:
        return None


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))


def command_p50(argv: list[str], cwd: Path, runs: int) -> float:
    return p50(lambda: subprocess.run(argv, cwd=cwd, capture_output=True, check=False), runs)


Case = tuple[str, Callable[[], object], list[str], list[str] | None]


def cases(repo: Path, ignored: Path) -> list[Case]:
    """Each measured call: (name, the call, its baseline command, ripgrep's if any)."""
    saved, saved_ignored = identify(str(repo)), identify(str(ignored))
    assert saved is not None and saved_ignored is not None
    deny = DenyList()
    home_folder = repo.parent / "clankie-home"  # beside the workspace, as a service's is
    home_folder.mkdir(exist_ok=True)
    home = file_id(os.stat(home_folder))

    def tool(fn: Callable[[Root], object], where: object = saved) -> Callable[[], object]:
        def once() -> object:
            with Root(where, home=home) as root:  # type: ignore[arg-type]
                return fn(root)
        return once

    return [
        ("search_text_rare_literal",
         tool(lambda r: search_text(r, SearchTextArgs(pattern=RARE, fixed=True), deny)),
         ["git", "grep", "-n", "-F", "-e", RARE], ["rg", "-n", "-F", RARE]),
        ("search_text_common_word",
         tool(lambda r: search_text(r, SearchTextArgs(pattern="handler"), deny)),
         ["git", "grep", "-n", "-m", "20", "-e", "handler"],
         ["rg", "-n", "-m", "20", "handler"]),
        ("list_files_depth_3",
         tool(lambda r: list_files(r, ListFilesArgs(depth=3), deny)),
         ["git", "ls-files", "--cached", "--others", "--exclude-standard"], None),
        ("read_file_window_in_50_MiB",
         tool(lambda r: read_file(r, ReadFileArgs(path="big.txt", offset=1000), deny)),
         ["git", "grep", "-c", "-F", "-e", RARE, "--", "big.txt"], None),
        ("git_status_10_changed", tool(lambda r: git_status(r, deny.denies)),
         ["git", "status", "--porcelain"], None),
        ("git_diff_10_changed", tool(lambda r: git_diff(r, GitDiffArgs(), deny.denies)),
         ["git", "diff"], None),
        ("git_log_50_commits", tool(lambda r: git_log(r, GitLogArgs(limit=50))),
         ["git", "log", "-n", "50", "--format=%H %an %aI %s"], None),
        ("list_files_16000_ignored_folders",
         tool(lambda r: list_files(r, ListFilesArgs(depth=3), deny), saved_ignored),
         ["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--directory"],
         None),
    ]


def peak_in_child(name: str, repo: Path, ignored: Path) -> int | None:
    """One call's peak (`peak_kib`) in a process of its own, warmed on an empty folder."""
    done = subprocess.run([sys.executable, __file__, "--peak", name, "--repo", str(repo),
                           "--ignored", str(ignored)], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--peak", help=argparse.SUPPRESS)  # a child's one call
    parser.add_argument("--repo", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ignored", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peak:
        with tempfile.TemporaryDirectory() as empty:
            (Path(empty) / "ws").mkdir()
            for _, fn, _, _ in cases(Path(empty) / "ws", Path(empty) / "ws"):
                with contextlib.suppress(Refusal):
                    fn()  # imports and caches, not the repository's
        chosen = {n: fn for n, fn, _, _ in cases(args.repo, args.ignored)}[args.peak]
        print(json.dumps(peak_kib(chosen)))
        return
    folder = Path(tempfile.mkdtemp(prefix="clankie-bench-ws-"))
    try:
        repo = folder / "repo"
        generate(repo, args.files)
        ignored = folder / "ignored"
        generate_ignored(ignored)
        figures: dict[str, dict[str, object]] = {}
        rg = shutil.which("rg")
        measured = cases(repo, ignored)
        for name, fn, baseline, ripgrep in measured:
            ours = p50(fn, args.runs)
            where = ignored if name.startswith("list_files_16000") else repo
            git = command_p50(baseline, where, args.runs)
            entry: dict[str, object] = {
                "p50_ms": round(ours, 2), "baseline_cmd_p50_ms": round(git, 2),
                "ratio_to_baseline": round(ours / git, 2),
                "peak_kib": peak_in_child(name, repo, ignored)}
            if ripgrep and rg:
                entry["rg_p50_ms"] = round(command_p50(ripgrep, repo, args.runs), 2)
            if name in TARGETS:
                said, met = TARGETS[name]
                entry["target"] = said
                entry["target_met"] = met(ours, git)
            figures[name] = entry
        print(json.dumps({"files": args.files, "runs": args.runs,
                          "baselines": {n: " ".join(b) for n, _, b, _ in measured},
                          "figures": figures}, indent=2))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    main()
