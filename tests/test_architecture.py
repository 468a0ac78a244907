"""The layout is the flow: packages import only downward, and nothing imports in a circle.

The contracts live in pyproject.toml (``[tool.importlinter]``) and docs/architecture.md draws
them. The second test turns the layers upside down and expects import-linter to object, so
the first cannot pass by checking nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_are_kept() -> None:
    result = _lint(ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_layers_upside_down_are_reported(tmp_path: Path) -> None:
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    layers = re.search(r"layers = \[\n(.*?)\n\]", config, re.S)
    assert layers is not None
    upside_down = "\n".join(reversed(layers.group(1).splitlines()))
    inverted = tmp_path / "pyproject.toml"
    inverted.write_text(config.replace(layers.group(1), upside_down), encoding="utf-8")
    result = _lint(inverted)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "app.web" in result.stdout  # it names the imports that now go the wrong way
