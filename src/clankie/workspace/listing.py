"""`list_files` (SPEC W1, W4, W6) and the repository-or-not choice the listing and the
search share.

Owns which entries of a folder are shown: in a Git workspace, tracked ones and untracked
ones that the ignore rules do not exclude (those are counted in `hidden_by_ignore`, and an
ignored folder is not entered); nested repositories appear with type `submodule`; outside
Git, every entry but `.git`. The entries come from `worktree`'s confined walk, sorted,
folder by folder. Secret-like paths are shown, marked `denied`, and so is clankie's own
home (W4), with nothing beneath it. A repository the Git tools
refuse (W7) is listed as a plain folder, and the result says so.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from contextlib import contextmanager

from clankie.core.vocabulary import WorkspaceCode
from clankie.tool_dto import Entry, ListFilesArgs, ListFilesResult

from .confine import Refusal, Root, check_path, opened, shown, tidy
from .deny import DenyList
from .gitrepo import repository
from .worktree import Worktree

MAX_ENTRIES = 200


# Why a repository is read as a plain folder by the listing and the search
_PLAIN = (WorkspaceCode.UNSAFE_REPOSITORY, WorkspaceCode.REPOSITORY_TOO_LARGE,
          WorkspaceCode.NOT_FOUND, WorkspaceCode.PERMISSION_DENIED)


@contextmanager
def worktree(root: Root) -> Iterator[tuple[Worktree, str | None]]:
    """The workspace as Git sees it, or as a plain folder (with a note saying why) when it
    is not a repository the Git tools read."""
    repo = None
    try:
        repo = repository(root)
        view = Worktree.of(root, repo)
    except Refusal as refusal:
        if repo is not None:
            repo.close()
        if refusal.code not in _PLAIN:
            raise
        yield Worktree.of(root, None), (f"read as a plain folder, without Git's ignore "
                                        f"rules: {refusal.reason}")
        return
    if repo is None:
        yield view, None
        return
    with repo:
        yield view, None


def list_files(root: Root, args: ListFilesArgs, deny: DenyList) -> ListFilesResult:
    path = tidy(check_path(args.path))
    must_be_directory(root, path)
    entries: list[Entry] = []
    hidden = 0
    truncated = False
    with worktree(root) as (view, note):
        for seen in view.walk(path, depth=args.depth):
            if seen.state == "ignored":
                hidden += 1
                continue
            if len(entries) == MAX_ENTRIES:
                truncated = True
                break
            kind = "submodule" if seen.state == "submodule" else seen.kind
            entries.append(Entry(path=seen.path, type=kind,
                                 size=seen.st.st_size if kind == "file" else None,
                                 denied=seen.home or deny.denies(seen.path)))
        said = "; ".join(n for n in (note, view.partial) if n) or None
        skipped = view.rules_skipped
    return ListFilesResult(entries=entries, truncated=truncated, hidden_by_ignore=hidden,
                           note=said, rules_skipped=skipped)


def must_be_directory(root: Root, path: str) -> None:
    with opened(root, path) as handle:
        if not stat.S_ISDIR(handle.st.st_mode):
            raise Refusal(WorkspaceCode.INVALID_PATH, f"{shown(path)} is not a directory")
