"""Issue 32 "Loops": `make check` runs ruff, then mypy beside the fast tests, and fails when
any part fails; `make test` (what `.ci/run` calls) lists its slowest 20 tests; every entry
of `SLOW` (tests/conftest.py) names a test that exists; and in a module whose `served` is
one service shared by its tests (tests/e2e/conftest.py), no test that stops the service,
rotates its token or changes its home takes it.

The Makefile is run for real, with `VENV` a folder of stand-in tools that record that they
ran and exit as told: no venv, no test run inside a test.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SLOW

ROOT = Path(__file__).resolve().parents[1]
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def fake_venv(tmp_path: Path, fail: str = "") -> Path:
    """A `.venv` whose ruff, mypy and python append their name to `ran` and exit 1 if it is
    `fail`; its install stamp is newer than pyproject.toml, so make installs nothing."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for tool in ("ruff", "mypy", "python"):
        script = venv / "bin" / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path}/ran\n'
                          f'exit {1 if tool == fail else 0}\n')
        script.chmod(0o755)
    (venv / ".installed").touch()
    return venv


def make(target: str, venv: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), target,
                           f"VENV={venv}", *extra], capture_output=True, text=True,
                          timeout=60, env=env)


@needs_make
def test_issue32_make_check_runs_ruff_mypy_and_the_fast_tests(tmp_path: Path):
    done = make("check", fake_venv(tmp_path))
    assert done.returncode == 0, done
    ran = (tmp_path / "ran").read_text().splitlines()
    assert ran[0] == "ruff check ."  # first, alone: it takes a tenth of a second
    assert sorted(line.split()[0] for line in ran[1:]) == ["mypy", "python"], ran
    tests = next(line for line in ran if line.startswith("python"))
    assert "-m pytest" in tests and "-n 2" in tests
    assert '-m not e2e and not tui and not slow and not hosts' in tests, tests


@needs_make
@pytest.mark.parametrize("fail", ["ruff", "mypy", "python"])
def test_issue32_make_check_fails_when_any_part_fails(tmp_path: Path, fail: str):
    done = make("check", fake_venv(tmp_path, fail))
    assert done.returncode != 0, done
    ran = (tmp_path / "ran").read_text().splitlines()
    if fail == "ruff":
        assert ran == ["ruff check ."]  # nothing else starts after a lint error


@needs_make
def test_issue32_make_test_runs_lint_then_everything_and_lists_the_slowest_20(
        tmp_path: Path):
    stamp = tmp_path / "hosts-installed"
    stamp.touch()
    done = make("test", fake_venv(tmp_path), f"HOSTS_STAMP={stamp}")
    assert done.returncode == 0, done
    ran = (tmp_path / "ran").read_text().splitlines()
    assert [line.split()[0] for line in ran] == ["ruff", "mypy", "python"], ran
    assert "--durations=20" in ran[2].split() and " -m " not in ran[2].replace(
        "-m pytest", ""), ran[2]  # no marker left out
    assert re.search(r"^make test$", (ROOT / ".ci" / "run").read_text(), re.M)


def test_issue32_every_slow_entry_names_a_test_that_exists():
    """An entry is a prefix of node IDs (as tests/conftest.py matches it): a module, or the
    start of a test's name in it."""
    for entry in SLOW:
        path, _, name = entry.partition("::")
        assert (ROOT / path).is_file(), entry
        if name:
            assert re.search(rf"^(async )?def {re.escape(name)}", (ROOT / path).read_text(),
                             re.M), entry


# What only a service of a test's own may undergo: stopped, its token rotated, its home's
# files changed.
DISTURBS = re.compile(r"\.stop\(|credentials\", \"rotate|credential_rotate|\.chmod\(|"
                      r"settings\.toml|token_file\.write")


def test_issue32_no_test_that_disturbs_a_shared_service_takes_it():
    shared = []
    for path in sorted((ROOT / "tests" / "e2e").glob("test_*.py")):
        tree = ast.parse(path.read_text())
        module_served = any(
            isinstance(node, ast.FunctionDef) and node.name == "served"
            and "shared_served" in ast.unparse(node) for node in tree.body)
        if not module_served:
            continue
        shared.append(path.name)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                takes = {a.arg for a in node.args.args}
                if "served" in takes or "asked" in takes:
                    assert not DISTURBS.search(ast.unparse(node)), (path.name, node.name)
    assert {"test_cli.py", "test_doctor.py"} <= set(shared)
