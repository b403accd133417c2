"""safetensors files read by our own header parser and a memory map (so BF16 and F8 work too): the header, checked
against the file's size before any tensor is touched, and one tensor as a :class:`~analysis.model.matrix.Matrix` or
a vector."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import numpy as np

from analysis.core.inputs import parse_json
from analysis.errors import ModelLoadError

from .matrix import STORED_DTYPES, Matrix

#: bytes per element of the safetensors dtypes (for checking headers; only STORED_DTYPES are read)
_ST_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip


def read_safetensors_header(path: Path) -> tuple[dict, int]:
    """The JSON header of a safetensors file and the byte offset where its data starts.

    Every tensor entry is checked before anything is mapped: a dtype string, a shape of non-negative integers,
    data offsets `[begin, end]` with `0 ≤ begin ≤ end` inside the file, and `end - begin` equal to the shape's
    size for known dtypes. A malformed header is a ModelLoadError naming the tensor, never an exception later.
    """
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ModelLoadError(f"{path.name}: too short to be a safetensors file")
            (n,) = struct.unpack("<Q", head)
            if n <= 0 or n > min(size - 8, 100 * 1024 * 1024):
                raise ModelLoadError(f"{path.name}: corrupt safetensors header (length {n})")
            header = parse_json(f.read(n), f"{path.name} (corrupt safetensors header)", ModelLoadError)
    except OSError as e:
        raise ModelLoadError(f"cannot read {path}: {e.strerror}") from e
    if not isinstance(header, dict):
        raise ModelLoadError(f"{path.name}: corrupt safetensors header (not an object)")
    header.pop("__metadata__", None)
    data_size = size - 8 - n
    for name, info in header.items():
        _check_tensor_entry(path.name, name, info, data_size)
    return header, 8 + n


def _check_tensor_entry(file: str, name: str, info: Any, data_size: int) -> None:
    """One safetensors header entry, checked (see :func:`read_safetensors_header`)."""
    bad = f"{file}: corrupt safetensors header: tensor {name!r}"
    if not isinstance(info, dict):
        raise ModelLoadError(f"{bad} is not an object")
    dt, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dt, str):
        raise ModelLoadError(f"{bad} has no dtype")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise ModelLoadError(
            f"{bad} has an invalid shape {shape!r} (dimensions must be non-negative integers)"
        )
    if (
        not isinstance(offs, list)
        or len(offs) != 2
        or not all(type(o) is int for o in offs)
        or not 0 <= offs[0] <= offs[1]
    ):
        raise ModelLoadError(f"{bad} has invalid data offsets {offs!r}")
    if offs[1] > data_size:
        raise ModelLoadError(f"{bad} lies past the end of the file (truncated or corrupt)")
    item = _ST_ITEMSIZE.get(dt)
    if item is not None and math.prod(shape) * item != offs[1] - offs[0]:
        raise ModelLoadError(f"{bad}: its shape {shape} does not match its {offs[1] - offs[0]:,} bytes")


def safetensors_matrix(path: Path, header: dict, data_start: int, name: str) -> Matrix:
    """Tensor `name` of a safetensors file (its checked `header`, data at `data_start`) as a memory-mapped 2-D
    :class:`~analysis.model.matrix.Matrix`."""
    info = header[name]
    dt, shape, (b, e) = info.get("dtype"), info.get("shape"), info.get("data_offsets", (0, 0))
    if dt not in STORED_DTYPES:
        raise ModelLoadError(f"{path.name}: tensor {name} has unsupported dtype {dt}")
    np_dt = np.dtype(STORED_DTYPES[dt])
    if not isinstance(shape, list) or len(shape) != 2:
        raise ModelLoadError(f"{path.name}: tensor {name} is not a matrix (shape {shape})")
    nbytes = int(np.prod(shape)) * np_dt.itemsize
    size = path.stat().st_size
    if e - b != nbytes or data_start + e > size:
        raise ModelLoadError(f"{path.name}: tensor {name} lies outside the file (truncated or corrupt)")
    mm = np.memmap(path, dtype=np_dt, mode="r", offset=data_start + b, shape=tuple(shape))
    return Matrix(mm, dt, name)


def safetensors_vector(path: Path, header: dict, data_start: int, name: str) -> np.ndarray:
    """Tensor `name` of a safetensors file as a float32 vector (an output bias)."""
    info = header[name]
    dt, (b, e) = info.get("dtype"), info.get("data_offsets", (0, 0))
    if dt not in STORED_DTYPES:
        raise ModelLoadError(f"{path.name}: tensor {name} has unsupported dtype {dt}")
    raw = np.memmap(
        path,
        dtype=np.dtype(STORED_DTYPES[dt]),
        mode="r",
        offset=data_start + b,
        shape=((e - b) // np.dtype(STORED_DTYPES[dt]).itemsize,),
    )
    return Matrix(raw.reshape(1, -1), dt, name).block(0, 1)[0]
