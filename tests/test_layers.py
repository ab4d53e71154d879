"""Issue 32: imports go down the layers (docs/architecture.md). The dispatcher's edge
(`api/`) never imports the phone page (`web/`), and neither imports `clankie serve`
(`clankie/serve.py`), which starts both listeners from above them."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "clankie"


def imported(folder: str) -> dict[str, set[str]]:
    """Each module of `folder` and the clankie modules it imports (lazily too)."""
    found: dict[str, set[str]] = {}
    for path in sorted((SRC / folder).glob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = ("clankie." + folder + ("." + node.module if node.module else "")
                        if node.level else node.module or "")
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[path.name] = {n for n in names if n.startswith("clankie")}
    return found


def test_issue32_the_api_never_imports_the_page_nor_what_starts_both():
    for module, names in imported("api").items():
        assert not {n for n in names if n.startswith(("clankie.web", "clankie.serve"))}, (
            module, names)


def test_issue32_the_page_never_imports_what_starts_it():
    for module, names in imported("web").items():
        assert not {n for n in names if n.startswith("clankie.serve")}, (module, names)


def test_issue32_serve_starts_both_listeners_from_above():
    tree = ast.parse((SRC / "serve.py").read_text())
    names = {f"{node.module}.{alias.name}" for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}
    assert {"clankie.web.app.create_web_app", "clankie.api.app"} <= names
    assert not (SRC / "api" / "server.py").exists()
