"""Issue 32, "imports that run one way": the modules of `clankie.agent` import one another
without a circle (`providers.py` makes the models; the models and `retry.py` take the
SDK client and the URLs from `sdk.py`, below both; `transcript.py` owns `Waits`, which
`retry.py` uses). Every import counts: at the top of a module, inside a function (a lazy
import) or under `TYPE_CHECKING`, as each is a dependency someone reading the code follows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import clankie.agent

PACKAGE = "clankie.agent"
FOLDER = Path(clankie.agent.__file__).parent


def _modules() -> dict[str, Path]:
    return {f"{PACKAGE}.{p.stem}": p for p in sorted(FOLDER.glob("*.py"))
            if p.stem != "__init__"}


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` that the module at `path` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: every module here is directly in the package
                base = ".".join(PACKAGE.split(".")[:len(PACKAGE.split(".")) - node.level + 1])
            else:
                base = ""
            stem = ".".join(part for part in (base, node.module or "") if part)
            found.add(stem)
            found.update(f"{stem}.{a.name}" for a in node.names)  # `from . import retry`
    return {m for m in found if m in modules}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    names = set(modules)
    return {name: imports_of(path, names) - {name} for name, path in modules.items()}


def a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as the list of its modules (the first again at the end), or
    None if the graph has none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return None
        path.append(node)
        for child in sorted(graph[node]):
            if (cycle := visit(child)) is not None:
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        if (cycle := visit(start)) is not None:
            return cycle
    return None


def test_issue32_the_agent_modules_import_one_another_without_a_cycle():
    graph = import_graph()
    assert len(graph) >= 9, sorted(graph)  # the walk found the package's modules
    assert a_cycle(graph) is None, " -> ".join(a_cycle(graph) or ())


def test_issue32_the_walk_sees_lazy_and_type_checking_imports(tmp_path: Path):
    names = {f"{PACKAGE}.{n}" for n in ("a", "b", "c", "d")}
    module = tmp_path / "a.py"
    module.write_text("from typing import TYPE_CHECKING\n"
                      "from . import b\n"
                      "if TYPE_CHECKING:\n    from .c import Thing\n"
                      "def f():\n    from clankie.agent.d import g\n    return g\n")
    assert imports_of(module, names) == {f"{PACKAGE}.b", f"{PACKAGE}.c", f"{PACKAGE}.d"}


def test_issue32_a_cycle_is_found_where_there_is_one():
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_issue32_the_models_take_their_sdk_client_from_below_providers():
    graph = import_graph()
    for model in ("openai_chat", "anthropic_messages", "retry", "probe"):
        assert f"{PACKAGE}.providers" not in graph[f"{PACKAGE}.{model}"], model
    assert f"{PACKAGE}.sdk" in graph[f"{PACKAGE}.openai_chat"]
