"""What this machine has: GPU memory (nvidia-smi) and available RAM (/proc/meminfo)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["gpu_memory_gib", "host_available_gib"]


def gpu_memory_gib() -> tuple[float | None, str]:
    """The smallest GPU's memory from nvidia-smi, or None and why not."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, "no GPU found (no nvidia-smi) and no --gpu-memory given"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=15,
            check=True,
        ).stdout
        return min(float(line) for line in out.split()) / 1024, ""  # MiB
    except (OSError, subprocess.SubprocessError, ValueError):
        return None, "nvidia-smi did not report GPU memory and no --gpu-memory given"


def host_available_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1024 * 1024)  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None
