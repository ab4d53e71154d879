"""A wheel holds every file the package reads at run time (README "Install for daily use":
a non-editable install, unlike `make`'s `pip install -e`, has only what the wheel carries)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_carries_every_file_of_the_package_not_only_the_python(tmp_path: Path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                            "--wheel-dir", str(tmp_path), str(ROOT)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    [wheel] = tmp_path.glob("clankie-*.whl")
    carried = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "src"
    needed = {str(p.relative_to(package)) for p in (package / "clankie").rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert "clankie/tui/chat.tcss" in needed
    assert {"clankie/web/static/page.js", "clankie/web/templates/home.html"} <= needed
    assert needed <= carried, sorted(needed - carried)
