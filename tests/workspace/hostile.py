"""Hostile repositories for the SPEC W7 attack campaign (`test_hostile_campaign.py`).

An attack is plain data (`Attack(kind, params)`), so Hypothesis can draw, print and shrink
it; `build(root, layout, attacks)` turns a list of them into a real repository under
`root`: `root/ws` is the workspace (the repository's top, or a folder of a repository
whose top is `root` when `layout == "subfolder"`), `root/outside` holds the secret of
`tests.workspace.tooling`, `root/victim` (when an attack needs it) is another repository
holding that secret, and nested repositories hold a denied `.env` with `DENIED`.

Building happens in two phases so that the hostile parts never fire while we build: every
attack first `prepare`s what needs Git (commits, nested repositories, a victim), then it
is `arm`ed by writing files directly (`.git/config`, hooks, attributes, `.git/index`,
loose objects, refs), and Git is not run again. Every command an attack plants touches
`root/marker.LABEL`, so a marker's name says which attack ran.

`Checker` calls one tool exactly as a run does and asserts every invariant after it, each
in its own `assert` so that Hypothesis reports distinct breaks separately.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import select
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import traceback
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clankie.workspace.tools import Outcome
from tests.polling import eventually
from tests.workspace.gitbombs import Pack, compressed, copy, delta, insert, zeros
from tests.workspace.tooling import SECRET, Place, git, make_place
from tests.workspace.watch import Watch

DENIED = "DENIED-SECRET-7c2e"  # in files the deny list covers (`.env`, `*.pem`)
DECOY = "decoy, not a secret\n"  # what hostile index/tree entries hold in the object store
UNSAFE_ALLOWED = {"unsafe_repository", "invalid_argument", "invalid_path"}
# while a second process moves its files, a repository can look absent or incomplete
MOVED_ALLOWED = {"not_a_repository", "not_found"}
GIT_TOOLS = ("git_status", "git_log", "git_diff")
HOOKS = (
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
    "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout",
    "post-merge", "pre-push", "pre-receive", "update", "proc-receive", "post-receive",
    "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite",
    "sendemail-validate", "fsmonitor-watchman", "p4-changelist", "p4-prepare-changelist",
    "p4-post-changelist", "p4-pre-submit", "post-index-change",
)


# --- Git's on-disk formats, written without Git -------------------------------------------

def write_object(gitdir: Path, kind: str, data: bytes) -> str:
    """A loose object (`kind` blob, tree or commit) in `gitdir`; its SHA-1."""
    body = f"{kind} {len(data)}".encode() + b"\0" + data
    sha = hashlib.sha1(body).hexdigest()
    path = gitdir / "objects" / sha[:2] / sha[2:]
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(zlib.compress(body))
    return sha


def read_object(gitdir: Path, sha: str) -> bytes:
    raw = zlib.decompress((gitdir / "objects" / sha[:2] / sha[2:]).read_bytes())
    return raw[raw.index(b"\0") + 1:]


def tree_bytes(entries: list[tuple[str, bytes, str]]) -> bytes:
    """A tree object's body from (mode, name, sha), sorted as Git sorts (a tree's name
    compares as if it ended in '/')."""
    def key(entry: tuple[str, bytes, str]) -> bytes:
        return entry[1] + (b"/" if entry[0] == "40000" else b"")
    return b"".join(f"{mode} ".encode() + name + b"\0" + bytes.fromhex(sha)
                    for mode, name, sha in sorted(entries, key=key))


def index_bytes(entries: list[tuple[int, str, bytes]]) -> bytes:
    """A version-2 index (Documentation/gitformat-index.txt) from (mode, sha, name): header
    `DIRC`, version 2, count; each entry 62 bytes (ten 32-bit stat fields, here zero so
    every entry looks stat-dirty, then mode among them, the 20-byte SHA-1 and 16 bits of
    flags holding the name's length) then the name and 1-8 NULs to a multiple of 8; the
    SHA-1 of all of that as trailer. Entries sorted by name bytes, as Git requires."""
    out = bytearray(b"DIRC" + struct.pack(">II", 2, len(entries)))
    for mode, sha, name in sorted(entries, key=lambda e: e[2]):
        entry = (struct.pack(">10I", 0, 0, 0, 0, 0, 0, mode, 0, 0, 0) + bytes.fromhex(sha)
                 + struct.pack(">H", min(len(name), 0xFFF)) + name)
        out += entry + b"\0" * (8 - len(entry) % 8)
    return bytes(out + hashlib.sha1(out).digest())


def index_entries(top: Path) -> list[tuple[int, str, bytes]]:
    """The index Git wrote, as (mode, sha, name) (stage 0 only)."""
    out = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=top, check=True,
                         capture_output=True, env=_git_env(top)).stdout
    entries = []
    for item in out.split(b"\0"):
        if item:
            meta, name = item.split(b"\t", 1)
            mode, sha, _ = meta.split(b" ")
            entries.append((int(mode, 8), sha.decode(), name))
    return entries


def _git_env(cwd: Path) -> dict[str, str]:
    return {"HOME": str(cwd), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "gc.auto",
            "GIT_CONFIG_VALUE_0": "0"}


def quote_config(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def config_text(key: str, value: str, case: str = "lower") -> str:
    """`[section "subsection"] key = "value"` for `section.subsection.key` (first and last
    dot), section and key in the given case (Git ignores theirs; never the subsection's)."""
    section, _, rest = key.partition(".")
    sub, _, name = rest.rpartition(".")
    if case == "upper":
        section, name = section.upper(), name.upper()
    elif case == "mixed":
        section, name = section[:1].upper() + section[1:], name[:1].upper() + name[1:]
    head = f"[{section} {quote_config(sub)}]" if sub else f"[{section}]"
    return f"{head}\n\t{name} = {quote_config(value)}\n"


# --- attacks as data ------------------------------------------------------------------------

@dataclass(frozen=True)
class Attack:
    kind: str
    params: tuple[tuple[str, Any], ...] = ()

    def get(self, name: str, default: Any = None) -> Any:
        return dict(self.params).get(name, default)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.params)
        return f"{self.kind}({inner})"


def attack(kind: str, **params: Any) -> Attack:
    return Attack(kind, tuple(params.items()))


@dataclass(frozen=True)
class ToolCall:
    tool: str
    args: tuple[tuple[str, Any], ...] = ()

    def arguments(self, root: Path) -> dict[str, Any]:
        return {k: v.replace("{root}", str(root)) if isinstance(v, str) else v
                for k, v in self.args}

    def __repr__(self) -> str:
        return f"{self.tool}({', '.join(f'{k}={v!r}' for k, v in self.args)})"


def call(tool: str, **args: Any) -> ToolCall:
    return ToolCall(tool, tuple((k, v) for k, v in args.items() if v is not None))


# --- building ---------------------------------------------------------------------------------

@dataclass
class Built:
    """A hostile repository on disk and what the checks need to know about it."""

    root: Path
    place: Place
    layout: str
    attacks: tuple[Attack, ...]
    top: Path  # the repository's top (ws, or root in the subfolder layout)
    gitdir: Path  # the git directory the attacks write into (the victim's when redirected)
    unsafe: list[str] = field(default_factory=list)  # why every Git tool must refuse
    may_refuse: list[str] = field(default_factory=list)  # why a clean git tool may refuse
    markers: dict[str, str] = field(default_factory=dict)  # label -> what plants it
    nested: list[str] = field(default_factory=list)  # nested repositories, ws-relative
    extra_index: list[tuple[int, str, bytes]] = field(default_factory=list)
    dropped_index: set[bytes] = field(default_factory=set)
    base_index: list[tuple[int, str, bytes]] = field(default_factory=list)
    victim: Path | None = None
    head: str = ""  # the commit HEAD names after prepare
    late: list[Callable[[], None]] = field(default_factory=list)  # armed after the index
    mutating: list[str] = field(default_factory=list)  # what a second process swaps in .git

    @property
    def ws(self) -> Path:
        return self.place.ws

    @property
    def ws_prefix(self) -> str:
        return "" if self.top == self.ws else "ws/"

    def marker_file(self, label: str, what: str) -> str:
        """The path of this attack's marker (`root/marker.LABEL`)."""
        label = "".join(c if c.isalnum() or c in "-_" else "_" for c in label)[:60]
        self.markers[label] = what
        return f"{self.root}/marker.{label}"

    def marker(self, label: str, what: str) -> str:
        """A shell command that touches this attack's marker (and ignores the arguments
        Git appends, so that it touches nothing else)."""
        return f"touch {self.marker_file(label, what)}; :"

    def marker_script(self, label: str, what: str) -> str:
        """An executable that touches this attack's marker, for settings Git runs without a
        shell (`gpg.program`) as well as with one."""
        script = self.root / "bin" / "".join(c if c.isalnum() or c in "-_" else "_"
                                             for c in label)[:60]
        script.parent.mkdir(exist_ok=True)
        script.write_text(f"#!/bin/sh\n{self.marker(label, what)}\n")
        script.chmod(0o755)
        return str(script)

    def config(self, text: str, gitdir: Path | None = None, name: str = "config") -> None:
        with open((gitdir or self.gitdir) / name, "a", encoding="utf-8") as out:
            out.write(text)

    def hooks(self, folder: Path, label: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for hook in HOOKS:
            script = folder / hook
            script.write_text(f"#!/bin/sh\n{self.marker(f'{label}-{hook}', f'hook {hook}')}\n")
            script.chmod(0o755)

    def attributes(self, where: str, line: str) -> None:
        """An attributes line, placed in one of the files Git reads attributes from."""
        if where == "info":
            (self.gitdir / "info").mkdir(exist_ok=True)
            target = self.gitdir / "info" / "attributes"
        elif where == "attributesFile":
            target = self.root / "cfg" / "attributes"
            target.parent.mkdir(exist_ok=True)
            self.config(config_text("core.attributesFile", str(target)))
        elif where == "sub":
            target = self.ws / "sub" / ".gitattributes"
        elif where == "top":
            target = self.top / ".gitattributes"
        else:
            target = self.ws / ".gitattributes"
        with open(target, "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def ensure_victim(self) -> Path:
        """`root/victim`: another repository whose history, index and working tree hold the
        outside secret, with a hostile configuration of its own."""
        if self.victim is None:
            victim = self.root / "victim"
            victim.mkdir()
            (victim / "secret.txt").write_text(f"{SECRET}\n")
            (victim / "README.md").write_text(f"victim {SECRET}\n")
            git("init", "-q", "-b", "main", cwd=victim)
            git("add", ".", cwd=victim)
            git("commit", "-q", "-m", f"victim {SECRET}", cwd=victim)
            (victim / "secret.txt").write_text(f"{SECRET} changed\n")
            self.victim = victim
            self.late.append(lambda: self._arm_victim(victim))
        return self.victim

    def _arm_victim(self, victim: Path) -> None:
        self.config(config_text("core.fsmonitor", self.marker("victim-fsmonitor",
                                                               "the victim's core.fsmonitor")),
                    gitdir=victim / ".git")
        self.hooks(victim / ".git" / "hooks", "victim-hook")

    def nested_repo(self, rel: str, form: str, armed: bool = True) -> None:
        """A repository inside the workspace at `rel` with a denied `.env` (and when `armed`
        a hostile configuration, filters and hooks of its own); untracked, or recorded in the
        outer index as a gitlink (`form` gitlink or submodule) whose checkout has moved on
        and is dirty."""
        inner = self.ws / rel
        inner.mkdir(parents=True)
        (inner / "app.py").write_text("print('nested')\n")
        (inner / ".env").write_text(f"TOKEN={DENIED}-1\n")
        git("init", "-q", "-b", "main", cwd=inner)
        git("add", "-f", ".", cwd=inner)
        git("commit", "-q", "-m", "nested one", cwd=inner)
        if form != "untracked":
            git("add", rel, cwd=self.ws)
            if form == "submodule":
                (self.top / ".gitmodules").write_text(
                    f'[submodule "{rel}"]\n\tpath = {self.ws_prefix}{rel}\n'
                    f"\turl = ext::sh -c touch% {self.marker_file('gitmodules-url', 'url')}\n"
                    f"\tupdate = !{self.marker('gitmodules-update', 'update')}\n")
                git("add", ".gitmodules", cwd=self.top)
            git("commit", "-q", "-m", f"add {rel}", cwd=self.top)
        (inner / ".env").write_text(f"TOKEN={DENIED}-2\n")
        (inner / "app.py").write_text("print('nested two')\n")
        git("commit", "-q", "-am", "nested two", cwd=inner)
        (inner / ".env").write_text(f"TOKEN={DENIED}-3 dirty\n")
        (inner / "app.py").write_text("print('nested dirty')\n")
        self.nested.append(rel)
        label = rel.replace("/", "-")
        if not armed:
            return

        def arm() -> None:
            gitdir = inner / ".git"
            for key, what in (("core.fsmonitor", "fsmonitor"), ("core.pager", "pager"),
                              ("filter.nested.clean", "filter"),
                              ("diff.nested.textconv", "textconv"),
                              ("diff.nested.command", "diff-command"),
                              ("diff.external", "diff-external")):
                self.config(config_text(key, self.marker(f"{label}-{what}",
                                                         f"nested {rel}: {key}")), gitdir)
            self.hooks(gitdir / "hooks", f"{label}-hook")
            (inner / ".gitattributes").write_text("* filter=nested diff=nested\n")
            os.utime(inner / "app.py", (1, 1))
        self.late.append(arm)


def _tracked(built: Built) -> list[Path]:
    return [built.ws / name for name in ("README.md", "app.py", "notes.txt", "sub/mod.py",
                                         ".env")]


def _base(root: Path, layout: str) -> Built:
    """The repository every attack starts from: two commits, a staged file, a modified
    file, an untracked and an ignored one, a tracked denied `.env`, an untracked `.pem`."""
    place = make_place(root)
    ws = place.ws
    top = ws if layout == "repo" else root
    (ws / "app.py").write_text("print('one')\n")
    (ws / "notes.txt").write_text("first\n")
    (ws / "sub").mkdir()
    (ws / "sub" / "mod.py").write_text("x = 1\n")
    (ws / ".env").write_text(f"TOKEN={DENIED}-1\n")
    (ws / ".gitignore").write_text("ignored/\n*.log\n")
    git("init", "-q", "-b", "main", cwd=top)
    if layout == "subfolder":  # the parent repository also tracks what lies outside
        (place.outside / "secret.txt").write_text(DECOY)
        (place.outside / "dir" / "inner.txt").write_text(DECOY)
    git("add", "-f", ".", cwd=top)
    git("commit", "-q", "-m", "first commit", cwd=top)
    (ws / "app.py").write_text("print('two')\n")
    git("commit", "-q", "-am", "second commit", cwd=top)
    if layout == "subfolder":
        (place.outside / "secret.txt").write_text(f"{SECRET}\n")
        (place.outside / "dir" / "inner.txt").write_text(f"{SECRET} inner\n")
    (ws / "app.py").write_text("print('three')\n")
    (ws / "staged.txt").write_text("staged\n")
    git("add", "staged.txt", cwd=ws)
    (ws / "untracked.txt").write_text("new\n")
    (ws / "ignored").mkdir()
    (ws / "ignored" / "x.txt").write_text("ignored\n")
    (ws / ".env").write_text(f"TOKEN={DENIED}-2\n")
    (ws / "keys").mkdir()
    (ws / "keys" / "server.pem").write_text(f"{DENIED} pem\n")
    built = Built(root, place, layout, (), top, top / ".git")
    built.head = git("rev-parse", "HEAD", cwd=top).strip()
    return built


# Each kind: (order, prepare, arm). Prepare may run Git; arm only writes files.
Step = Callable[[Built, Attack, int], None]
KINDS: dict[str, tuple[int, Step | None, Step | None]] = {}


def kind(name: str, order: int = 0, prepare: Step | None = None) -> Callable[[Step], Step]:
    def register(arm: Step) -> Step:
        KINDS[name] = (order, prepare, arm)
        return arm
    return register


COMMAND_STYLES = {
    "script": "",  # the path of an executable that touches the marker
    "touch": "{m}",
    "touch; cat": "{m}; cat",
    "touch; false": "{m}; false",
    "sh -c": "sh -c '{m}; cat \"$@\"' -",
}


@kind("config_command")
def _config_command(b: Built, a: Attack, i: int) -> None:
    key, style = a.get("key"), a.get("style", "script")
    label, what = f"a{i}-{key}", f"{key} in .git/config"
    if style == "script":
        command = b.marker_script(label, what)
    else:
        command = COMMAND_STYLES[style].format(m=b.marker(label, what))
        if key.startswith("credential."):
            command = "!" + command  # a helper that is a shell snippet
    b.config(config_text(key, command, a.get("case", "lower")))
    if key.startswith("remote."):
        b.config(config_text("remote.origin.url", "ssh://example.invalid/x"))


@kind("filter")
def _filter(b: Built, a: Attack, i: int) -> None:
    name, which = a.get("name"), a.get("which")
    command = b.marker(f"a{i}-filter-{which}", f"filter {name!r}.{which}")
    b.config(config_text(f"filter.{name}.{which}",
                         command if which == "process" else f"{command}; cat",
                         a.get("case", "lower")))
    if a.get("required"):
        b.config(config_text(f"filter.{name}.required", "true"))
    b.attributes(a.get("attrs", "ws"), f"* filter={name}")


@kind("diff_driver")
def _diff_driver(b: Built, a: Attack, i: int) -> None:
    name, which = a.get("name"), a.get("which")
    command = b.marker(f"a{i}-diff-{which}", f"diff {name!r}.{which}")
    value = command if which == "command" else f"sh -c '{command}; cat \"$1\"' -"
    b.config(config_text(f"diff.{name}.{which}", value, a.get("case", "lower")))
    b.attributes(a.get("attrs", "ws"), f"* diff={name}")


@kind("hooks")
def _hooks(b: Built, a: Attack, i: int) -> None:
    where = a.get("where", "gitdir")
    b.late.append(lambda: [os.utime(path, (1, 1)) for path in _tracked(b)])  # index refresh
    if where == "gitdir":
        b.hooks(b.gitdir / "hooks", f"a{i}-hook")
        return
    folder = {"hooksPath-ws": b.ws / ".githooks", "hooksPath-outside": b.root / "hooks",
              "hooksPath-relative": b.top / ".githooks"}[where]
    b.hooks(folder, f"a{i}-hook")
    b.config(config_text("core.hooksPath", ".githooks" if where == "hooksPath-relative"
                         else str(folder)))


INCLUDE_PAYLOADS = ("core.fsmonitor", "core.pager", "diff.external", "filter.inc=x.clean",
                    "core.hooksPath", "core.worktree", "core.bare")


@kind("include")
def _include(b: Built, a: Attack, i: int) -> None:
    payload, how, where = a.get("payload"), a.get("how"), a.get("where")
    b.unsafe.append(f"the configuration includes another file ({how})")
    if payload == "core.worktree":
        text = config_text(payload, str(b.place.outside))
    elif payload == "core.bare":
        text = config_text(payload, "true")
    elif payload == "core.hooksPath":
        b.hooks(b.root / f"inc-hooks-{i}", f"a{i}-inc-hook")
        text = config_text(payload, str(b.root / f"inc-hooks-{i}"))
    else:
        text = config_text(payload, b.marker(f"a{i}-include-{payload}",
                                             f"{payload} included by {how}") + "; cat")
        if payload.startswith("filter."):
            b.attributes("ws", "* filter=inc=x")
    if where == "ws":
        target = b.ws / f"hostile-{i}.gitconfig"
        ref = os.path.relpath(target, b.gitdir)
    else:
        (b.root / "cfg").mkdir(exist_ok=True)
        target = b.root / "cfg" / f"include-{i}.gitconfig"
        ref = str(target)
    if a.get("twice"):  # the included file includes the file holding the payload
        second = target.with_suffix(".second")
        second.write_text(text, encoding="utf-8")
        text = config_text("include.path", second.name)
    target.write_text(text, encoding="utf-8")
    b.config(config_text(how, ref))


@kind("worktree")
def _worktree(b: Built, a: Attack, i: int) -> None:
    value = a.get("value").replace("{root}", str(b.root))
    b.config(config_text("core.worktree", value))
    b.unsafe.append(f"core.worktree={value}")


@kind("bare")
def _bare(b: Built, a: Attack, i: int) -> None:
    b.config(config_text("core.bare", a.get("value", "true")))
    b.unsafe.append("core.bare")


@kind("worktree_config")
def _worktree_config(b: Built, a: Attack, i: int) -> None:
    payload = a.get("payload")
    b.config(config_text("core.repositoryformatversion", "1")
             + config_text("extensions.worktreeConfig", "true"))
    if payload == "core.worktree":
        value = str(b.place.outside)
        b.unsafe.append("core.worktree in config.worktree")
    elif payload == "core.bare":
        value = "true"
        b.unsafe.append("core.bare in config.worktree")
    else:
        value = b.marker(f"a{i}-worktree-config", f"{payload} in config.worktree") + "; cat"
    b.config(config_text(payload, value), name="config.worktree")


def _prepare_gitfile(b: Built, a: Attack, i: int) -> None:
    victim = b.ensure_victim()
    b.gitdir = victim / ".git"  # later attacks arm the repository Git would really use


@kind("gitfile", order=9, prepare=_prepare_gitfile)
def _gitfile(b: Built, a: Attack, i: int) -> None:
    assert b.victim is not None
    form = a.get("form")
    target = b.victim / ".git"
    dot_git = b.top / ".git"
    shutil.rmtree(dot_git)
    if form == "symlink":
        dot_git.symlink_to(os.path.relpath(target, b.top))
    else:
        where = str(target) if form == "absolute" else os.path.relpath(target, b.top)
        dot_git.write_text(f"gitdir: {where}\n")
    b.unsafe.append(f".git is a {form} redirect to another repository")


def _prepare_victim(b: Built, a: Attack, i: int) -> None:
    b.ensure_victim()


@kind("commondir", prepare=_prepare_victim)
def _commondir(b: Built, a: Attack, i: int) -> None:
    assert b.victim is not None
    target = b.victim / ".git"
    where = str(target) if a.get("form") == "absolute" else os.path.relpath(target, b.gitdir)
    (b.gitdir / "commondir").write_text(where + "\n")
    b.may_refuse.append("commondir, never followed: what it names is missing")


@kind("alternates", prepare=_prepare_victim)
def _alternates(b: Built, a: Attack, i: int) -> None:
    assert b.victim is not None
    objects = b.victim / ".git" / "objects"
    where = (str(objects) if a.get("form") == "absolute"
             else os.path.relpath(objects, b.gitdir / "objects"))
    (b.gitdir / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (b.gitdir / "objects" / "info" / "alternates").write_text(where + "\n")
    # the victim's secret blob, staged in the workspace under an innocent name
    sha = hashlib.sha1(f"blob {len(SECRET) + 1}\0{SECRET}\n".encode()).hexdigest()
    b.extra_index.append((0o100644, sha, f"{b.ws_prefix}stolen.txt".encode()))
    b.config(config_text("core.alternateRefsCommand",
                         b.marker(f"a{i}-alternateRefs", "core.alternateRefsCommand")))
    b.may_refuse.append("objects/info/alternates, never followed: the objects are missing")


HOSTILE_NAMES = (
    "{ws}../outside/secret.txt", "/etc/passwd", ".git/config", "{ws}a/../../outside/secret.txt",
    "{ws}.GIT/x", "{ws}.Git/config", "{ws}a//b", "{ws}./README.md", "{ws}a/./b", "..", ".",
    "", "{ws}sub/.git/hooks/x", "{ws}sub/..", "{ws}../outside/dir/inner.txt", "{ws}.git",
    "{ws}sub/.GIT", "{root}/outside/secret.txt", "/", "{ws}README.md/",
)


@kind("index_names")
def _index_names(b: Built, a: Attack, i: int) -> None:
    sha = write_object(b.gitdir, "blob", DECOY.encode())
    mode = a.get("mode", 0o100644)
    for template in a.get("names"):
        name = template.replace("{ws}", b.ws_prefix).replace("{root}", str(b.root))
        b.extra_index.append((mode, sha, name.encode()))
    if a.get("replace"):  # the hostile entry replaces a real one rather than joining it
        b.dropped_index.add(f"{b.ws_prefix}notes.txt".encode())
    b.unsafe.append(f"index entries {a.get('names')!r}")


@kind("stat_dirty", order=10)
def _stat_dirty(b: Built, a: Attack, i: int) -> None:
    which = a.get("which", "all")
    when = {"epoch": (1, 1), "future": (4_000_000_000, 4_000_000_000)}[a.get("when", "epoch")]
    files = _tracked(b) if which == "all" else [b.ws / which]
    for path in files:
        if a.get("grow") and path.name == "app.py":
            with open(path, "a") as out:
                out.write("# grown\n")
        if path.exists():
            os.utime(path, when)


INDEX_WRITES = ("core.splitIndex=true", "core.untrackedCache=true", "feature.manyFiles=true",
                "index.version=4", "gc.auto=1", "gc.autoPackLimit=1", "maintenance.auto=true",
                "index.skipHash=true", "core.sharedRepository=group", "index.threads=true",
                "core.checkStat=minimal", "core.trustctime=false")


@kind("index_writes", order=5)
def _index_writes(b: Built, a: Attack, i: int) -> None:
    for setting in a.get("settings"):
        key, _, value = setting.partition("=")
        b.config(config_text(key, value))
    for path in _tracked(b):
        os.utime(path, (1, 1))


@kind("diff_submodule", order=1, prepare=lambda b, a, i: None if b.nested else
      b.nested_repo("nested", "gitlink", armed=a.get("armed", False)))
def _diff_submodule(b: Built, a: Attack, i: int) -> None:
    for setting in a.get("settings"):
        key, _, value = setting.partition("=")
        b.config(config_text(key, value))


@kind("nested", prepare=lambda b, a, i: b.nested_repo(a.get("where"), a.get("form"),
                                                     a.get("armed", True)))
def _nested(b: Built, a: Attack, i: int) -> None:
    pass  # armed late by nested_repo, after the outer index is written


def _prepare_signed(b: Built, a: Attack, i: int) -> None:
    b.head = git("rev-parse", "HEAD", cwd=b.top).strip()


@kind("gpg_signature", prepare=_prepare_signed)
def _gpg_signature(b: Built, a: Attack, i: int) -> None:
    fmt = a.get("format", "openpgp")
    program = {"openpgp": "gpg.program", "x509": "gpg.x509.program"}[fmt]
    b.config(config_text("log.showSignature", "true") + config_text("gpg.format", fmt)
             + config_text(program, b.marker_script(f"a{i}-gpg-{fmt}", f"{program} on a "
                                                    "signed commit with log.showSignature")))
    parent = read_object(b.gitdir, b.head)
    tree = parent.split(b"\n", 1)[0].split(b" ")[1].decode()
    signature = {"openpgp": "PGP SIGNATURE", "x509": "SIGNED MESSAGE"}[fmt]
    body = (f"tree {tree}\nparent {b.head}\n"
            "author t <t@example.invalid> 1700000000 +0000\n"
            "committer t <t@example.invalid> 1700000000 +0000\n"
            f"gpgsig -----BEGIN {signature}-----\n \n iQEzBAABCAAdFiEE\n"
            f" -----END {signature}-----\n\nsigned commit\n")
    _set_head(b, write_object(b.gitdir, "commit", body.encode()))


def _set_head(b: Built, sha: str) -> None:
    ref = (b.gitdir / "HEAD").read_text().strip()
    assert ref.startswith("ref: "), ref
    (b.gitdir / ref[5:]).write_text(sha + "\n")
    b.head = sha


@kind("promisor")
def _promisor(b: Built, a: Attack, i: int) -> None:
    m = "touch " + b.marker_file(f"a{i}-lazy-fetch",
                                 "a lazy fetch of a partial clone's missing object")
    b.config(config_text("core.repositoryformatversion", "1")
             + config_text("extensions.partialClone", "origin")
             + config_text("remote.origin.url", f"ext::sh -c {m.replace(' ', '% ')}")
             + config_text("remote.origin.promisor", "true")
             + config_text("protocol.ext.allow", "always")
             + config_text("protocol.allow", "always")
             + config_text("remote.origin.uploadpack", b.marker(f"a{i}-uploadpack",
                                                                "remote.origin.uploadpack")))
    missing = hashlib.sha1(b"missing" + str(i).encode()).hexdigest()
    b.extra_index.append((0o100644, missing, f"{b.ws_prefix}lazy.txt".encode()))
    b.may_refuse.append("a partial clone missing an object")


POINTS_OUTSIDE = ("mailmap.file", "core.excludesFile", "core.attributesFile", "diff.orderFile",
                  "include.path", "blame.ignoreRevsFile", "commit.template")


@kind("points_outside")
def _points_outside(b: Built, a: Attack, i: int) -> None:
    key = a.get("key")
    b.config(config_text(key, str(b.place.outside / a.get("target", "secret.txt"))))
    if key == "include.path":  # a repository's configuration that includes files is unsafe
        b.unsafe.append("include.path pointing outside")


@kind("symlinks", prepare=lambda b, a, i: _symlinks(b, commit=True) if a.get("tracked")
      else None)
def _symlinks_arm(b: Built, a: Attack, i: int) -> None:
    if not a.get("tracked"):
        _symlinks(b, commit=False)


def _symlinks(b: Built, commit: bool) -> None:
    (b.ws / "link-out").symlink_to("../outside/secret.txt")
    (b.ws / "dir-out").symlink_to("../outside")
    (b.ws / "sub" / "up").symlink_to("..")
    if commit:
        git("add", "link-out", "dir-out", "sub/up", cwd=b.ws)
        git("commit", "-q", "-m", "links", cwd=b.ws)


@kind("tree_names", prepare=_prepare_signed)
def _tree_names(b: Built, a: Attack, i: int) -> None:
    """A commit on top of HEAD whose tree has an entry Git's path rules forbid, holding
    `outside/secret.txt` (a decoy) and a hostile `config`."""
    decoy = write_object(b.gitdir, "blob", DECOY.encode())
    config = write_object(b.gitdir, "blob", config_text(
        "core.fsmonitor", b.marker(f"a{i}-tree-config", "a config in a tree")).encode())
    outside = write_object(b.gitdir, "tree", tree_bytes([("100644", b"secret.txt", decoy)]))
    inner = write_object(b.gitdir, "tree", tree_bytes([("40000", b"outside", outside),
                                                       ("100644", b"config", config)]))
    parent = read_object(b.gitdir, b.head)
    tree = parent.split(b"\n", 1)[0].split(b" ")[1].decode()
    entries = _parse_tree(read_object(b.gitdir, tree))
    entries.append(("40000", a.get("name").encode(), inner))
    top = write_object(b.gitdir, "tree", tree_bytes(entries))
    body = (f"tree {top}\nparent {b.head}\n"
            "author t <t@example.invalid> 1700000000 +0000\n"
            "committer t <t@example.invalid> 1700000000 +0000\n\nhostile tree\n")
    _set_head(b, write_object(b.gitdir, "commit", body.encode()))
    b.may_refuse.append("a tree entry Git's path rules forbid")


def _parse_tree(data: bytes) -> list[tuple[str, bytes, str]]:
    entries = []
    while data:
        head, data = data.split(b"\0", 1)
        mode, name = head.split(b" ", 1)
        entries.append((mode.decode(), name, data[:20].hex()))
        data = data[20:]
    return entries


_ZEROS = 64 * 1024 * 1024


@functools.cache
def _zero_stream() -> bytes:
    """64 MiB of zeros as one zlib stream (about 64 KB), made once."""
    return compressed(zeros(_ZEROS))


BOMBS = ("loose_declared", "loose_lying", "packed_declared", "packed_lying", "delta_chain",
         "delta_loop", "delta_huge", "offset_outside")


@kind("object_bomb")
def _object_bomb(b: Built, a: Attack, i: int) -> None:
    """HEAD names an object whose store lies (W5, W7): a size it does not have, a stream
    that inflates past it, a delta chain of 60 or a loop, a 1 GiB result, an offset
    outside its pack. Refused within the bounds, never inflated."""
    form = a.get("form")
    oid = hashlib.sha1(f"bomb {form} {i}".encode()).hexdigest()
    stream = _zero_stream()
    if form in ("loose_declared", "loose_lying"):  # 64 MiB of zeros, said or not
        header = f"commit {_ZEROS if form == 'loose_declared' else 200}\0".encode()
        (b.gitdir / "objects" / oid[:2]).mkdir(parents=True, exist_ok=True)
        (b.gitdir / "objects" / oid[:2] / oid[2:]).write_bytes(_with_header(header))
    else:
        pack = Pack()
        if form == "packed_declared":
            pack.raw(oid, 1, 1 << 30, stream)
        elif form == "packed_lying":
            pack.raw(oid, 1, 300, stream)
        elif form == "delta_huge":
            _, at = pack.add("blob", b"base\n")
            pack.ofs_delta(oid, at, delta(5, 1 << 30, [copy(0, 5)]))
        elif form == "delta_chain":
            data = read_object(b.gitdir, b.head)
            _, at = pack.add("commit", data, oid=hashlib.sha1(f"c{i}".encode()).hexdigest())
            for n in range(60):
                last = oid if n == 59 else hashlib.sha1(f"c{i} {n}".encode()).hexdigest()
                at = pack.ofs_delta(last, at, delta(len(data), len(data),
                                                    [copy(0, len(data))]))
        elif form == "delta_loop":
            other = hashlib.sha1(f"loop {i}".encode()).hexdigest()
            pack.ref_delta(oid, other, delta(5, 5, [insert(b"abcde")]))
            pack.ref_delta(other, oid, delta(5, 5, [insert(b"abcde")]))
        else:  # offset_outside
            pack.add("commit", read_object(b.gitdir, b.head), oid=oid)
        pack.save(b.gitdir, name=f"bomb{i}",
                  offsets={oid: 1 << 30} if form == "offset_outside" else None)
    _set_head(b, oid)
    b.may_refuse.append(f"HEAD names an object bomb ({form})")


def _with_header(header: bytes) -> bytes:
    """A loose object's stream: the header, then 64 MiB of zeros (however few it says)."""
    squeeze = zlib.compressobj(9)
    return squeeze.compress(header) + squeeze.compress(b"\0" * _ZEROS) + squeeze.flush()


@kind("mutator", prepare=_prepare_victim)
def _mutator(b: Built, a: Attack, i: int) -> None:
    """A second process swaps the git directory's files for symlinks to the outside secret
    and back, and writes alternates and commondir naming the victim, while tools run."""
    head = b.head or git("rev-parse", "HEAD", cwd=b.top).strip()
    names = ["HEAD", "index", f"objects/{head[:2]}", "refs/heads/main", "packed-refs"]
    names += [f"objects/pack/{p.name}" for p in (b.gitdir / "objects" / "pack").glob("*")]
    b.mutating = [n for n in names if (b.gitdir / n).exists()][:a.get("most", 8)]
    b.may_refuse.append("a second process changes the repository during calls")


def build(root: Path, layout: str, attacks: tuple[Attack, ...]) -> Built:
    """The base repository with every attack prepared then armed; no Git runs after the
    first arm, and no marker exists yet (checked)."""
    b = _base(root, layout)
    b.attacks = attacks
    ordered = sorted(enumerate(attacks), key=lambda ia: KINDS[ia[1].kind][0])
    for i, a in ordered:
        prepare = KINDS[a.kind][1]
        if prepare is not None:
            prepare(b, a, i)
    b.base_index = index_entries(b.gitdir.parent)  # arming may not run Git any more
    for i, a in ordered:
        if KINDS[a.kind][0] < 9:
            arm = KINDS[a.kind][2]
            if arm is not None:
                arm(b, a, i)
    if b.extra_index or b.dropped_index:  # hostile entries: our own index, not Git's
        kept = [e for e in b.base_index if e[2] not in b.dropped_index]
        (b.gitdir / "index").write_bytes(index_bytes(kept + b.extra_index))
    for late in b.late:
        late()
    for i, a in ordered:
        if KINDS[a.kind][0] >= 9:
            arm = KINDS[a.kind][2]
            if arm is not None:
                arm(b, a, i)
    fired = sorted(p.name for p in root.rglob("marker.*"))
    assert not fired, f"building the scenario ran a planted command: {fired}"
    return b


# --- invariants -------------------------------------------------------------------------------

def fingerprint(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under `root`: type, mode, size, mtime and a digest of a file's bytes (a
    symlink's target); directories by mode and mtime (an entry created or removed shows)."""
    seen: dict[str, tuple[Any, ...]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            st = path.lstat()
            digest = ""
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            elif stat.S_ISLNK(st.st_mode):
                digest = os.readlink(path)
            size = st.st_size if not stat.S_ISDIR(st.st_mode) else None
            seen[str(path.relative_to(root))] = (st.st_mode, size, st.st_mtime_ns, digest)
    return seen


def changes(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]],
            folders_move: bool = False) -> list[str]:
    """What differs; with `folders_move` (a second process renamed entries in them and
    back), not a folder's mtime."""
    if folders_move:
        before, after = ({p: (v[0], v[1], None, v[3]) if stat.S_ISDIR(v[0]) else v
                          for p, v in seen.items()} for seen in (before, after))
    found = [f"created {p}" for p in sorted(after.keys() - before.keys())]
    found += [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    for path in sorted(before.keys() & after.keys()):
        if before[path] != after[path]:
            what = ("bytes" if before[path][3] != after[path][3] else
                    "size" if before[path][1] != after[path][1] else
                    "mode" if before[path][0] != after[path][0] else "mtime")
            found.append(f"changed {path} ({what})")
    return found


def _result_text(tool: str, result: dict[str, Any]) -> str:
    """The result as the model reads it, minus a search's echo of its own pattern."""
    shown = {k: v for k, v in result.items() if not (tool == "search_text" and k == "pattern")}
    return json.dumps(shown, ensure_ascii=False)


def _named_paths(tool: str, result: dict[str, Any]) -> list[str]:
    """The paths a result names: entries, matches, status lines, a diff's file headers."""
    if tool in ("list_files", "git_status"):
        return [e["path"] for e in result.get("entries", [])]
    if tool == "search_text":
        return [m["path"] for m in result.get("matches", [])]
    if tool == "git_diff":
        return [line.split(" b/", 1)[-1] for line in result.get("diff", "").splitlines()
                if line.startswith("diff --git ")]
    return []


def _beyond(path: str) -> bool:
    """Whether a named path is absolute or climbs out with a `..` component."""
    return path.startswith("/") or ".." in path.split("/")


# A second process that changes a git directory while tools read it (W7): each name in
# turn becomes a symlink to the secret (or its folder) and comes back, each step a rename
# as a concurrent writer would do it; alternates and commondir naming another repository
# come and go. `CONTROL/pause` makes it stop in a restored state and say so
# (`CONTROL/paused`) until the file is gone; `CONTROL/stop` ends it.
MUTATOR = """
import os, sys, time
gitdir, secret, other, control = sys.argv[1:5]
targets = sys.argv[5:]
pause, paused, stop = (os.path.join(control, n) for n in ("pause", "paused", "stop"))

def swap(path):
    kept, link = path + ".kept", path + ".link"
    folder = os.path.isdir(path) and not os.path.islink(path)
    try:
        os.symlink(os.path.dirname(secret) if folder else secret, link)
        os.rename(path, kept)
        os.rename(link, path)
    finally:
        if os.path.lexists(kept):
            if os.path.islink(path):
                os.unlink(path)
            os.rename(kept, path)
        if os.path.lexists(link):
            os.unlink(link)

rounds = 0
while not os.path.exists(stop) and rounds < 1_000_000:
    if os.path.exists(pause):
        open(paused, "w").close()
        deadline = time.monotonic() + 120
        while os.path.exists(pause) and time.monotonic() < deadline:
            time.sleep(0.001)
        os.unlink(paused)
        continue
    for name in targets:
        swap(os.path.join(gitdir, name))
    for name, text in (("objects/info/alternates", other + "/objects\\n"),
                       ("commondir", other + "\\n")):
        path = os.path.join(gitdir, name)
        with open(path + ".new", "w") as new:
            new.write(text)
        os.rename(path + ".new", path)
        os.unlink(path)
    rounds += 1
    if rounds == 1:  # every swap has been made once: the parent may start its reads
        sys.stdout.write("1")
        sys.stdout.flush()
"""


class Mutator:
    """`MUTATOR` running over a git directory, made once it has swapped every target once
    (so that no read meant to race it happens before it runs, however slowly a busy
    machine starts it); `paused()` holds it still for a check."""

    STARTING = 60.0  # seconds the mutator may take to start on a busy machine

    def __init__(self, gitdir: Path, secret: Path, other: Path, targets: list[str]) -> None:
        self.control = Path(tempfile.mkdtemp(prefix="clankie-mutator-"))  # not fingerprinted
        self.child = subprocess.Popen([sys.executable, "-c", MUTATOR, str(gitdir),
                                       str(secret), str(other), str(self.control), *targets],
                                      stdout=subprocess.PIPE)
        assert self.child.stdout is not None
        ready, _, _ = select.select([self.child.stdout], [], [], self.STARTING)
        if not ready or os.read(self.child.stdout.fileno(), 1) != b"1":
            code = self.stop()
            raise AssertionError(f"the mutator did not swap within {self.STARTING:g} s "
                                 f"(exit status {code})")

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        (self.control / "pause").touch()
        try:
            eventually(lambda: (self.control / "paused").exists()
                       or self.child.poll() is not None, "the mutator to pause",
                       timeout=30, every=0.001)
            yield
        finally:
            (self.control / "pause").unlink()

    def stop(self) -> int:
        (self.control / "stop").touch()
        try:
            return self.child.wait(timeout=30)
        finally:
            if self.child.poll() is None:
                self.child.kill()
                self.child.wait()
            if self.child.stdout is not None:
                self.child.stdout.close()
            shutil.rmtree(self.control, ignore_errors=True)


class Checker:
    """Calls tools on a built scenario and checks every invariant after each call."""

    def __init__(self, built: Built) -> None:
        self.built = built
        self.before = fingerprint(built.root)
        self.mutator = None
        if built.mutating:
            assert built.victim is not None
            self.mutator = Mutator(built.gitdir, built.place.outside / "secret.txt",
                                   built.victim / ".git", built.mutating)
        watched = [built.place.outside, built.place.outside / "dir"]
        if built.victim is not None:
            watched += [built.victim, built.victim / ".git"]
        nested = []
        for rel in built.nested:
            nested += [built.ws / rel, built.ws / rel / ".git"]
        self.watch = Watch(*watched, *nested)
        self.nested_dirs = {str(p) for p in nested}

    def close(self) -> None:
        self.watch.close()
        if self.mutator is not None:
            assert self.mutator.stop() == 0, "the mutator failed"

    def describe(self) -> str:
        b = self.built
        lines = [f"scenario: layout={b.layout} attacks={list(b.attacks)!r}"]
        if b.unsafe:
            lines.append(f"  unsafe because: {b.unsafe}")
        return "\n".join(lines)

    def _read_past(self) -> tuple[list[str], list[str]]:
        """What was opened since the last drain: (outside or victim, inside a nested
        repository: its config, index or denied .env)."""
        outside, entered = [], []
        for event in self.watch.opened():
            where = event.rsplit(" ", 1)[0]
            parent, _, name = where.rpartition("/")
            if parent in self.nested_dirs or where in self.nested_dirs:
                if name in (".env", "config", "index", "config.worktree"):
                    entered.append(event)
            else:
                outside.append(event)
        return sorted(set(outside)), sorted(set(entered))

    def check(self, tc: ToolCall) -> None:
        b = self.built
        args = tc.arguments(b.root)
        where = f"\n  call: {tc!r}\n  {self.describe()}"
        self.watch.opened()  # nothing before this call counts
        try:
            outcome = b.place.call(tc.tool, **args)
            raised = ""
        except Exception:  # the invariant is that nothing raises
            outcome, raised = None, traceback.format_exc(limit=-3)
        with self.mutator.paused() if self.mutator else contextlib.nullcontext():
            self._after(tc, args, where, outcome, raised)

    def _after(self, tc: ToolCall, args: dict[str, Any], where: str,
               outcome: Outcome | None, raised: str) -> None:
        """The invariants after one call (a second process, if any, holds still)."""
        b = self.built
        outside, entered = self._read_past()
        assert outcome is not None, f"[W7 never raises] the tool raised:{where}\n{raised}"
        text = _result_text(tc.tool, outcome.result)
        assert outcome.status in ("ok", "refused"), (
            f"[W7 ok or refused, never error] status {outcome.status}:{where}\n  {text[:300]}")
        if outcome.status == "refused":
            assert set(outcome.result) == {"status", "code", "reason"} and len(
                outcome.text) < 300, f"[W1 refusal shape] {outcome.text[:400]}{where}"
        fired = sorted(p.name[len("marker."):] for p in b.root.rglob("marker.*"))
        assert not fired, (
            "[W7 never runs a command] planted commands ran: "
            f"{[(m, b.markers.get(m, '?')) for m in fired]}{where}")
        assert SECRET not in text, (
            f"[W7 never reads past the workspace] the outside secret is in the result:{where}"
            f"\n  result: {_around(text, SECRET)}")
        assert DENIED not in text, (
            f"[W4/W7 deny list] a denied file's content is in the result:{where}"
            f"\n  result: {_around(text, DENIED)}")
        assert not outside, (
            f"[W7 never reads past the workspace] files outside were opened: {outside[:8]}"
            f"{where}")
        named = _named_paths(tc.tool, outcome.result) if outcome.status == "ok" else []
        beyond = [p for p in named if _beyond(p)]
        assert not beyond, (
            f"[W7 results name only paths beneath the workspace] {beyond[:6]}{where}")
        inside_nested = [p for p in named if tc.tool in GIT_TOOLS
                         for rel in b.nested if p.startswith(rel + "/") and p != rel + "/"]
        assert not entered and not inside_nested, (
            f"[W7 nested repositories are never entered] opened {entered[:6]}, "
            f"named {inside_nested[:6]}{where}")
        after = fingerprint(b.root)
        self.watch.opened()  # our own fingerprint's reads
        changed = changes(self.before, after, folders_move=self.mutator is not None)
        assert not changed, (
            f"[W7/W10 nothing under .git or the workspace changes] {changed[:10]}{where}")
        allowed = UNSAFE_ALLOWED | (MOVED_ALLOWED if self.mutator else set())
        # The mutator renames the index away and back: read in that instant, there is no
        # index, a state a repository may lawfully be in, so an unsafety the index alone
        # carries may go unseen by that call (nothing else is excused: what it reads is
        # still checked above).
        index_gone = "index" in b.mutating and all(
            why.startswith("index entries") for why in b.unsafe)
        if b.unsafe and tc.tool in GIT_TOOLS and not (index_gone and outcome.status == "ok"):
            assert outcome.status == "refused" and outcome.code in allowed, (
                f"[W7 unsafe_repository] expected a refusal unsafe_repository, got "
                f"{outcome.status} {outcome.code}:{where}\n  result: {text[:300]}")
        if (not b.unsafe and not b.may_refuse and tc.tool in ("git_status", "git_log")
                and _clean_path(args.get("path"))):
            assert outcome.status == "ok", (
                f"[W7 neutralised, not refused] a hostile but safe repository made "
                f"{tc.tool} refuse {outcome.code}: {outcome.result.get('reason')}{where}")


def _clean_path(path: str | None) -> bool:
    return path is None or path in ("README.md", "app.py", "sub", "sub/mod.py", ".")


def _around(text: str, needle: str) -> str:
    at = text.find(needle)
    return text[max(0, at - 120):at + 80]
