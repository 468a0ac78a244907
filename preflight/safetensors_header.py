"""One safetensors file's tensors, from its header alone (no torch, no tensor data read).

The format: an 8-byte little-endian header length, a JSON header, then the data.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TensorInfo", "read_safetensors_header"]

_MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own limit


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    file: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """The tensors a safetensors file declares; ValueError when the file is malformed or cut."""
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("shorter than the 8-byte header length")
        size = int.from_bytes(head, "little")
        if size > _MAX_HEADER_BYTES:
            raise ValueError(f"header length {size} is not plausible (not a safetensors file?)")
        raw = f.read(size)
    if len(raw) < size:
        raise ValueError("the header is cut off (incomplete download?)")
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"the header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    data_len = path.stat().st_size - 8 - size
    tensors: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            start, end = (int(x) for x in entry["data_offsets"])
            info = TensorInfo(
                name,
                str(entry["dtype"]),
                tuple(int(x) for x in entry["shape"]),
                end - start,
                path.name,
            )
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"tensor {name!r} has a malformed header entry") from None
        if end > data_len:
            raise ValueError(
                f"truncated: tensor {name!r} ends at data byte {end}, the file holds {data_len}"
                " (incomplete download?)"
            )
        tensors[name] = info
    return tensors
