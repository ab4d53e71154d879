"""SPEC W7 (with W4, W10) as a generated attack campaign: a random hostile repository, random
tool calls, and after every call the same invariants.

Each example builds a fresh repository in its own temporary folder (`tests.workspace.hostile`):
command-running configuration (`core.fsmonitor`, pagers, filters and diff drivers with odd
names named by `.gitattributes`, hooks and `core.hooksPath`, `gpg.program` with
`log.showSignature`, includes of all of these), redirections (`core.worktree`, `core.bare`,
a `.git` file or symlink, `commondir`, alternates, `config.worktree`), index entries that
break Git's path rules (written as a real version-2 index), nested repositories with
their own hostile configuration and a denied `.env`, stat-dirty files, a partial clone
that would fetch, configuration pointing at files outside, object stores that lie (zlib and
delta bombs, offsets outside a pack), and a second process that swaps the git directory's
files for symlinks to the secret (and back) while the tools run. Then it calls every tool with
random valid arguments, pathspec magic and odd revisions among them. After every call:

- no planted command ran (no `marker.*` file anywhere under the folder);
- the result holds neither the outside secret nor a denied file's content, and nothing
  outside the workspace (or inside a nested repository) was opened (inotify);
- the status is `ok` or `refused` (never `error`, never an exception), a refusal has the
  short shape `{status, code, reason}`;
- every file under the folder, `.git` and its index included, is byte-identical (and keeps
  its mtime) - nothing was created or removed;
- no path a result names is absolute or climbs out with `..`; a Git tool names nothing
  inside a nested repository;
- a `.git` file or symlink, `core.worktree`, `core.bare` or index entries breaking Git's
  path rules make every Git tool refuse `unsafe_repository`; `commondir` and alternates
  are never followed (what they name is missing, never read: the inotify check);
- otherwise `git_status` and `git_log` with a plain path still answer `ok` (the hostile
  parts are neutralised, not a reason to refuse).

Every tool is called once per example (random arguments, random order) plus up to six
more random calls. A second test runs each attack kind alone with the calls most likely
to trip it, so every kind is covered in every run. Failures name the invariant, the call
and the scenario; the full example is printed as a Hypothesis note.

The default run is small and derandomized (CI reproducible); `CLANKIE_CAMPAIGN_EXAMPLES=500`
runs that many fresh random examples instead.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from tests.workspace.hostile import (
    BOMBS,
    COMMAND_STYLES,
    HOSTILE_NAMES,
    INCLUDE_PAYLOADS,
    INDEX_WRITES,
    POINTS_OUTSIDE,
    Attack,
    Checker,
    ToolCall,
    attack,
    build,
    call,
)

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux only"),
]

LONG_RUN = os.environ.get("CLANKIE_CAMPAIGN_EXAMPLES")
CAMPAIGN = settings(
    max_examples=int(LONG_RUN) if LONG_RUN else 40,
    derandomize=not LONG_RUN,  # the default run tests the same examples every time
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    # no explain phase: it reruns failing examples (a repository each) to annotate them
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)

# --- what an attacker writes ------------------------------------------------------------------

COMMAND_KEYS = (
    "core.fsmonitor", "core.pager", "pager.status", "pager.log", "pager.diff", "pager.ls-files",
    "pager.rev-parse", "core.editor", "sequence.editor", "core.sshCommand", "core.askPass",
    "credential.helper", "credential.https://example.invalid.helper", "core.gitProxy",
    "gpg.program", "core.alternateRefsCommand", "uploadpack.packObjectsHook", "diff.external",
    "remote.origin.uploadpack", "remote.origin.receivepack",
)
ODD_NAMES = ("evil", "a=b", "a.b", "x=y.clean", "a b", 'q"uote', "Evil", "ÉVIL", "фильтр",
             "a=", "a.b=c.d", "lfs", "x'y", "UP=Case.Dot")
ATTRIBUTE_FILES = ("ws", "sub", "info", "attributesFile", "top")
CASES = ("lower", "upper", "mixed")

config_command = st.builds(
    lambda key, style, case: attack("config_command", key=key, style=style, case=case),
    st.sampled_from(COMMAND_KEYS), st.sampled_from(sorted(COMMAND_STYLES)),
    st.sampled_from(CASES))
filter_attack = st.builds(
    lambda name, which, attrs, required, case: attack(
        "filter", name=name, which=which, attrs=attrs, required=required, case=case),
    st.sampled_from(ODD_NAMES), st.sampled_from(("clean", "smudge", "process")),
    st.sampled_from(ATTRIBUTE_FILES), st.booleans(), st.sampled_from(CASES))
diff_driver = st.builds(
    lambda name, which, attrs, case: attack("diff_driver", name=name, which=which, attrs=attrs,
                                            case=case),
    st.sampled_from(ODD_NAMES), st.sampled_from(("textconv", "command")),
    st.sampled_from(ATTRIBUTE_FILES), st.sampled_from(CASES))
hooks = st.builds(lambda where: attack("hooks", where=where), st.sampled_from(
    ("gitdir", "hooksPath-ws", "hooksPath-outside", "hooksPath-relative")))
include = st.builds(
    lambda payload, how, where, twice: attack("include", payload=payload, how=how,
                                              where=where, twice=twice),
    st.sampled_from(INCLUDE_PAYLOADS),
    st.sampled_from(("include.path", "includeIf.gitdir:/.path", "includeIf.onbranch:**.path",
                     "includeIf.gitdir/i:/.path")),
    st.sampled_from(("cfg", "ws")), st.booleans())
worktree = st.builds(lambda value: attack("worktree", value=value), st.sampled_from(
    ("{root}/outside", "/", "{root}/victim", "../../outside", "/etc")))
bare = st.builds(lambda value: attack("bare", value=value),
                 st.sampled_from(("true", "yes", "1", "on", "TRUE")))
worktree_config = st.builds(lambda payload: attack("worktree_config", payload=payload),
                            st.sampled_from(("core.fsmonitor", "core.pager", "core.worktree",
                                             "core.bare")))
gitfile = st.builds(lambda form: attack("gitfile", form=form),
                    st.sampled_from(("relative", "absolute", "symlink")))
commondir = st.builds(lambda form: attack("commondir", form=form),
                      st.sampled_from(("relative", "absolute")))
alternates = st.builds(lambda form: attack("alternates", form=form),
                       st.sampled_from(("relative", "absolute")))
index_names = st.builds(
    lambda names, mode, replace: attack("index_names", names=tuple(names), mode=mode,
                                        replace=replace),
    st.lists(st.sampled_from(HOSTILE_NAMES), min_size=1, max_size=3, unique=True),
    st.sampled_from((0o100644, 0o100755, 0o120000)), st.booleans())
stat_dirty = st.builds(
    lambda which, when, grow: attack("stat_dirty", which=which, when=when, grow=grow),
    st.sampled_from(("all", "app.py", ".env", "README.md")),
    st.sampled_from(("epoch", "future")), st.booleans())
index_writes = st.builds(
    lambda keys: attack("index_writes", settings=tuple(keys)),
    st.lists(st.sampled_from(INDEX_WRITES), min_size=1, max_size=4, unique=True))
diff_submodule = st.builds(
    lambda keys, armed: attack("diff_submodule", settings=("diff.submodule=diff", *keys),
                               armed=armed),
    st.lists(st.sampled_from(("diff.ignoreSubmodules=none", "submodule.recurse=true",
                              "status.submoduleSummary=true", "status.showUntrackedFiles=all")),
             max_size=3, unique=True), st.booleans())
nested = st.builds(lambda where, form, armed: attack("nested", where=where, form=form,
                                                    armed=armed),
                   st.sampled_from(("nested", "sub/inner")),
                   st.sampled_from(("untracked", "gitlink", "submodule")), st.booleans())
gpg_signature = st.builds(lambda fmt: attack("gpg_signature", format=fmt),
                          st.sampled_from(("openpgp", "x509")))
promisor = st.just(attack("promisor"))
points_outside = st.builds(lambda key: attack("points_outside", key=key),
                           st.sampled_from(POINTS_OUTSIDE))
symlinks = st.builds(lambda tracked: attack("symlinks", tracked=tracked), st.booleans())
tree_names = st.builds(lambda name: attack("tree_names", name=name),
                       st.sampled_from(("..", ".git", ".GIT", ".", "")))
object_bomb = st.builds(lambda form: attack("object_bomb", form=form), st.sampled_from(BOMBS))
mutator = st.builds(lambda most: attack("mutator", most=most), st.integers(1, 8))

# Command-running configuration first: Hypothesis shrinks toward the earlier choices.
ATTACKS = st.one_of(config_command, filter_attack, diff_driver, hooks, stat_dirty, include,
                    nested, diff_submodule, index_writes, gpg_signature, index_names, worktree,
                    bare, worktree_config, gitfile, commondir, alternates, promisor,
                    points_outside, symlinks, tree_names, object_bomb, mutator)


SINGLE = ("gitfile", "nested", "diff_submodule", "symlinks", "tree_names", "gpg_signature",
          "promisor", "alternates", "commondir", "object_bomb", "mutator")


def _compatible(attacks: list[Attack]) -> tuple[Attack, ...]:
    """At most one of each kind that reshapes the repository; no new commits on a victim."""
    kept: list[Attack] = []
    for a in attacks:
        kinds = [k.kind for k in kept]
        if a.kind in SINGLE and a.kind in kinds:
            continue
        heads = {"tree_names", "gpg_signature", "object_bomb"}  # each sets HEAD
        if (a.kind in heads and ("gitfile" in kinds or heads & set(kinds))) or (
                a.kind == "gitfile" and heads & set(kinds)):
            continue
        kept.append(a)
    return tuple(kept)


def attack_lists() -> st.SearchStrategy[tuple[Attack, ...]]:
    return st.lists(ATTACKS, min_size=1, max_size=4).map(_compatible)


# --- what a model asks ------------------------------------------------------------------------

PATHS = (".", "README.md", "app.py", "sub", "sub/mod.py", ".env", "keys/server.pem",
         "nested", "nested/.env", "sub/inner/.env", ".git", ".git/config", ".git/index",
         ":(top)", ":/", ":/.env", ":(top)outside/secret.txt", ":(glob)**", ":(glob)**/.env",
         ":(icase).ENV", ":(exclude)README.md", ":!README.md", ":(literal)app.py",
         ":(attr:filter)", "*", "**/*.txt", "sub/../..", "sub/..", "..",
         "../outside/secret.txt", "/etc/passwd", "outside/secret.txt", "link-out",
         "dir-out/secret.txt", "sub/up/../..", "stolen.txt", "lazy.txt", "a", ".GIT/x")
REVISIONS = ("HEAD", "HEAD~1", "HEAD^", "main", "@", "HEAD@{0}", "@{-1}", ":/SECRET",
             ":/victim", "HEAD:app.py", "HEAD^{tree}", "ORIG_HEAD", "FETCH_HEAD",
             "refs/heads/main", "--output={root}/marker.output-option",
             "--output=marker.output-relative", "-p", "--ext-diff", "HEAD -- :/",
             "HEAD..HEAD~1", "0" * 40, "nested", "HEAD~2", "main@{upstream}",
             "HEAD:../outside/secret.txt")
PATTERNS = ("OUTSIDE", "SECRET", "DENIED", ".", "print", "TOKEN", "^", "secret", "touch",
            "x*", "[", "(?i)denied-secret")

maybe_path = st.none() | st.sampled_from(PATHS)
PER_TOOL = (
    st.builds(lambda p, d: call("list_files", path=p, depth=d), st.sampled_from(PATHS),
              st.integers(1, 3)),
    st.builds(lambda p, o, n: call("read_file", path=p, offset=o, limit=n),
              st.sampled_from(PATHS), st.integers(1, 3), st.integers(1, 1000)),
    st.builds(lambda pat, p, f, i, m: call("search_text", pattern=pat, path=p, fixed=f,
                                           include_ignored=i, max_results=m),
              st.sampled_from(PATTERNS), st.sampled_from(PATHS), st.booleans(), st.booleans(),
              st.integers(1, 500)),
    st.just(call("git_status")),
    st.builds(lambda p, n: call("git_log", path=p, limit=n), maybe_path, st.integers(1, 50)),
    st.builds(lambda r, p, s: call("git_diff", revision=r, path=p, staged=s),
              st.none() | st.sampled_from(REVISIONS), maybe_path, st.booleans()),
)
TOOL_CALLS = st.one_of(*PER_TOOL)


def call_lists() -> st.SearchStrategy[list[ToolCall]]:
    """Every tool once with random arguments, then up to six more random calls, shuffled."""
    return st.tuples(st.tuples(*PER_TOOL), st.lists(TOOL_CALLS, max_size=6)).flatmap(
        lambda drawn: st.permutations([*drawn[0], *drawn[1]]))


def run_campaign(layout: str, attacks: tuple[Attack, ...], calls: list[ToolCall]) -> None:
    root = Path(tempfile.mkdtemp(prefix="clankie-campaign-"))
    try:
        checker = Checker(build(root, layout, attacks))
        try:
            for tc in calls:
                checker.check(tc)
        finally:
            checker.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@CAMPAIGN
@given(layout=st.sampled_from(("repo", "subfolder")), attacks=attack_lists(),
       calls=call_lists())
def test_w7_a_generated_hostile_repository_breaks_no_invariant(
        layout: str, attacks: tuple[Attack, ...], calls: list[ToolCall]):
    # printed with the failure whatever the pytest plugins do to Hypothesis's own report
    note(f"layout={layout!r}\nattacks={attacks!r}\ncalls={calls!r}")
    run_campaign(layout, attacks, calls)


# --- every attack alone, with the calls most likely to trip it --------------------------------

BATTERY = [
    call("git_status"), call("git_diff"), call("git_diff", staged=True),
    call("git_diff", revision="HEAD~1"), call("git_log"), call("git_diff", path=":/"),
    call("git_diff", path=":(top)"), call("git_log", path=":/.env"),
    call("list_files", path=".", depth=3),
    call("search_text", pattern="OUTSIDE|DENIED|touch", include_ignored=True),
]
EACH = [
    attack("config_command", key="core.fsmonitor", style="touch; false", case="upper"),
    attack("config_command", key="core.pager", style="touch; cat", case="lower"),
    attack("config_command", key="diff.external", style="script", case="mixed"),
    attack("filter", name="a=b", which="clean", attrs="ws", required=False, case="lower"),
    attack("filter", name="x=y.clean", which="process", attrs="info", required=True,
           case="mixed"),
    attack("diff_driver", name="a=b", which="textconv", attrs="sub", case="lower"),
    attack("hooks", where="gitdir"),
    attack("hooks", where="hooksPath-outside"),
    attack("include", payload="filter.inc=x.clean", how="includeIf.gitdir:/.path",
           where="cfg", twice=True),
    attack("worktree", value="{root}/outside"),
    attack("worktree", value="/"),
    attack("bare", value="true"),
    attack("worktree_config", payload="core.worktree"),
    attack("gitfile", form="relative"),
    attack("gitfile", form="symlink"),
    attack("commondir", form="relative"),
    attack("alternates", form="absolute"),
    attack("index_names", names=("{ws}../outside/secret.txt",), mode=0o100644, replace=False),
    attack("index_names", names=(".git/config", "{ws}.GIT/x", "{ws}a//b"), mode=0o100644,
           replace=True),
    attack("index_names", names=("/etc/passwd",), mode=0o100644, replace=False),
    attack("stat_dirty", which="all", when="epoch", grow=False),
    attack("index_writes", settings=("core.splitIndex=true", "core.untrackedCache=true")),
    attack("nested", where="nested", form="untracked", armed=True),
    attack("nested", where="sub/inner", form="gitlink", armed=True),
    attack("diff_submodule", settings=("diff.submodule=diff",), armed=False),
    attack("diff_submodule", settings=("diff.submodule=diff", "diff.ignoreSubmodules=none"),
           armed=True),
    attack("gpg_signature", format="openpgp"),
    attack("promisor"),
    attack("points_outside", key="mailmap.file"),
    attack("symlinks", tracked=True),
    attack("tree_names", name=".."),
    *(attack("object_bomb", form=form) for form in BOMBS),
    attack("mutator", most=8),
]


@pytest.mark.parametrize(("layout", "hostile"),
                         [("repo", a) for a in EACH]
                         + [("subfolder", attack("stat_dirty", which="all", when="epoch",
                                                 grow=True))],
                         ids=lambda v: repr(v) if isinstance(v, Attack) else v)
def test_w7_each_attack_alone_breaks_no_invariant(layout: str, hostile: Attack):
    run_campaign(layout, (hostile,), BATTERY)
