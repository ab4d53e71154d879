"""Git, run read-only with fixed arguments (SPEC W7), and the tools `git_status`, `git_log`,
`git_diff`.

Owns every Git command a workspace tool runs. Each runs: without a shell or pager; with
`-c core.fsmonitor=false`, `--no-optional-locks`, no protocol allowed (so nothing is
fetched); with every command-running setting the repository's configuration names
(filters, diff drivers and textconv, pagers, fsmonitor) overridden empty on the command
line, which Git reads last; with no inherited `GIT_*` variables and no terminal prompt;
in the workspace's own directory handle (so a swapped directory is never entered); and
within `git_timeout`. Pathspecs come after `--`; a revision may not start with `-`.
Nothing a workspace's `.git/config` or `.gitattributes` says makes a tool run a command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from clankie.tool_dto import (
    Commit,
    GitDiffArgs,
    GitDiffResult,
    GitLogArgs,
    GitLogResult,
    GitStatusResult,
    StatusEntry,
)

from .confine import Refusal, Root, check_path, tidy
from .deny import DenyList

DIFF_BYTES = 32 * 1024
STATUS_ENTRIES = 200
OUTPUT_BYTES = 16 * 1024 * 1024  # more than any tool keeps: the rest is never read

# Settings whose value is a command Git may run while reading. Each one the repository
# sets is overridden empty; empty means "no command" to Git.
_RUNS_COMMANDS = re.compile(
    r"^(filter\..+\.(clean|smudge|process)|diff\..+\.(command|textconv)|diff\.external|"
    r"core\.(fsmonitor|pager|sshcommand|askpass|editor|gitproxy)|pager\..+|"
    r"credential\..*helper|gpg\..*program|sequence\.editor|uploadpack\..+|"
    r"remote\..+\.(uploadpack|receivepack|proxy)|core\.alternaterefscommand)$",
    re.IGNORECASE)
FIXED = ["--no-pager", "--no-optional-locks", "-c", "core.fsmonitor=false",
         "-c", "core.pager=cat", "-c", "protocol.allow=never", "-c", "core.quotepath=off",
         "-c", "color.ui=false"]


def environment() -> dict[str, str]:
    """This process's environment without `GIT_*` (nothing inherited chooses a repository,
    a config or a command), with no prompts, pagers, protocols or optional locks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(LC_ALL="C", GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat",
               PAGER="cat", GIT_OPTIONAL_LOCKS="0", GIT_ALLOW_PROTOCOL="",
               GIT_NO_LAZY_FETCH="1", GIT_ASKPASS="", SSH_ASKPASS="")
    return env


@dataclass
class Git:
    """Git in one workspace, for one tool call."""

    root: Root
    timeout: float
    _overrides: list[str] | None = None
    _prefix: str | None = None

    def run(self, *args: str, check: bool = True) -> bytes:
        git = shutil.which("git")
        if git is None:
            raise Refusal("git_unavailable", "git is not installed")
        argv = [git, *FIXED, *self._safe_overrides(git), *args]
        return self._spawn(argv, check)

    def _spawn(self, argv: list[str], check: bool) -> bytes:
        try:
            done = subprocess.run(argv, cwd=self.root.proc_path, env=environment(),
                                  stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=self.timeout, pass_fds=(self.root.fd,), check=False)
        except subprocess.TimeoutExpired:
            raise Refusal("git_unavailable", f"git took longer than {self.timeout:g} s") \
                from None
        except OSError as exc:
            raise Refusal("git_unavailable", f"git could not run: {exc.strerror}") from None
        if check and done.returncode != 0:
            error = done.stderr.decode("utf-8", "replace").strip().splitlines()
            first = error[0][:160] if error else f"exit {done.returncode}"
            if "not a git repository" in first.lower():
                raise Refusal("not_a_repository", "the workspace is not in a Git repository")
            raise Refusal("git_unavailable", f"git failed: {first}")
        return done.stdout[:OUTPUT_BYTES]

    def _safe_overrides(self, git: str) -> list[str]:
        """`-c KEY=` for every command-running setting the configuration names."""
        if self._overrides is None:
            listed = self._spawn([git, *FIXED, "config", "--null", "--list"], check=False)
            keys = {item.split(b"\n", 1)[0].decode("utf-8", "replace")
                    for item in listed.split(b"\0") if item}
            self._overrides = [arg for key in sorted(keys) if _RUNS_COMMANDS.match(key)
                               for arg in ("-c", f"{key}=")]
        return self._overrides

    def prefix(self) -> str:
        """Where the workspace lies inside its repository ('' at the top); refuses a
        workspace that Git does not see as a work tree."""
        if self._prefix is None:
            out = self.run("rev-parse", "--is-inside-work-tree", "--show-prefix")
            fields = out.decode("utf-8", "replace").splitlines()
            if not fields or fields[0] != "true":
                raise Refusal("not_a_repository", "the workspace is not a Git work tree")
            self._prefix = fields[1] if len(fields) > 1 else ""
        return self._prefix

    def ls_files(self, *options: str, path: str = ".") -> list[str]:
        """`git ls-files -z OPTIONS -- PATH`, as paths relative to the workspace."""
        self.prefix()
        out = self.run("ls-files", "-z", *options, "--", path)
        return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]


def is_repository(root: Root, timeout: float) -> Git | None:
    """Git for this workspace, or None when it is not in a repository (or Git is absent,
    in which case the workspace is treated as a plain folder)."""
    git = Git(root, timeout)
    try:
        git.prefix()
    except Refusal:
        return None
    return git


def git_status(root: Root, timeout: float) -> GitStatusResult:
    git = Git(root, timeout)
    prefix = git.prefix()
    out = git.run("status", "--porcelain=v1", "-z", "--branch", "--untracked-files=all",
                  "--ignore-submodules=all", "--", ".")
    items = out.split(b"\0")
    branch = None
    entries: list[StatusEntry] = []
    truncated = False
    index = 0
    while index < len(items):
        item = items[index].decode("utf-8", "replace")
        index += 1
        if not item:
            continue
        if item.startswith("## "):
            branch = _branch(item[3:])
            continue
        code, name = item[:2], item[3:]
        if code[0] in "RC":
            index += 1  # the rename's source path follows
        if len(entries) == STATUS_ENTRIES:
            truncated = True
            break
        entries.append(StatusEntry(path=_relative(name, prefix), status=code))
    return GitStatusResult(branch=branch, entries=entries, truncated=truncated)


def git_log(root: Root, args: GitLogArgs, timeout: float) -> GitLogResult:
    git = Git(root, timeout)
    git.prefix()
    path = tidy(check_path(args.path)) if args.path is not None else "."
    out = git.run("log", f"--max-count={args.limit}", "--no-decorate", "--no-show-signature",
                  "--no-color", "--format=%H%x1f%an%x1f%aI%x1f%s%x1e", "--", path)
    commits = []
    for record in out.decode("utf-8", "replace").split("\x1e"):
        fields = record.strip("\n").split("\x1f")
        if len(fields) == 4:
            commits.append(Commit(commit=fields[0], author=fields[1], date=fields[2],
                                  subject=fields[3][:300]))
    return GitLogResult(commits=commits)


def git_diff(root: Root, args: GitDiffArgs, deny: DenyList, timeout: float) -> GitDiffResult:
    git = Git(root, timeout)
    git.prefix()
    path = tidy(check_path(args.path)) if args.path is not None else "."
    argv = ["diff", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames"]
    if args.staged:
        argv.append("--cached")
    if args.revision is not None:
        revision = args.revision
        if not revision or revision.startswith("-") or "\x00" in revision:
            raise Refusal("invalid_argument", "a revision may not be empty or start with '-'")
        verified = git.run("rev-parse", "--verify", "--quiet", "--end-of-options",
                           f"{revision}^{{commit}}", check=False).decode().strip()
        if not re.fullmatch(r"[0-9a-f]{40,64}", verified):
            raise Refusal("invalid_argument", f"{revision!r} is not a commit of this "
                          "repository")
        argv.append(verified)
    out = git.run(*argv, "--", path, *deny.git_excludes())
    return _head_and_tail(out)


def _head_and_tail(out: bytes) -> GitDiffResult:
    if len(out) <= DIFF_BYTES:
        return GitDiffResult(diff=out.decode("utf-8", "replace"), truncated=False)
    half = DIFF_BYTES // 2
    head = out[:half].decode("utf-8", "ignore")
    tail = out[-half:].decode("utf-8", "ignore")
    cut = len(out) - 2 * half
    return GitDiffResult(diff=f"{head}\n… [diff cut: {cut} bytes omitted; give a path to "
                         f"see less] …\n{tail}", truncated=True)


def _branch(header: str) -> str | None:
    """The branch from porcelain's `## ...` line: `main...origin/main [ahead 1]`,
    `No commits yet on main`, or `HEAD (no branch)` (detached: None)."""
    if header.startswith("No commits yet on "):
        return header[len("No commits yet on "):]
    if header.startswith("HEAD (no branch)"):
        return None
    return header.split("...")[0].split(" ")[0]


def _relative(name: str, prefix: str) -> str:
    return name[len(prefix):] if prefix and name.startswith(prefix) else name
