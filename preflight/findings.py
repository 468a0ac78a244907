"""What a check reports: a :class:`Status` and a :class:`Finding`, one output line each."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["Finding", "GiB", "Status", "gib"]

GiB = 1 << 30


class Status(StrEnum):
    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Finding:
    """One output line: a check's verdict, what was seen and (for WARN/FAIL) what to do."""

    check: str
    status: Status
    message: str
    fix: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


def gib(n: float) -> str:
    """A byte count as messages show it."""
    return f"{n / GiB:.2f} GiB"
