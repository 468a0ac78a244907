"""The display text of a parsed answer, straight from SPEC "Display text": the oracle that
the scrubber's tests and its benchmark compare against."""

from __future__ import annotations

from typing import Any


def display_of(obj: Any, prose: str = "") -> str:
    """Blocks joined by a blank line: the prose before the object (if any), each ``recommend``,
    and each challenge's ``title``/``description`` in the order they appear, joined by a newline."""
    blocks = [prose] if prose else []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "recommend" and isinstance(value, str):
                blocks.append(value)
            elif key == "challenges" and isinstance(value, list):
                for item in value:
                    if not isinstance(item, dict):
                        continue
                    fields = [
                        v
                        for k, v in item.items()
                        if k in ("title", "description") and isinstance(v, str)
                    ]
                    if fields:
                        blocks.append("\n".join(fields))
    return "\n\n".join(blocks)
