"""Reading a GGUF file's header without gguf-py: the metadata (key → value), the tensor infos (name, shape, type,
offset) and where the tensor data starts, so that a tensor is a memory map of its bytes.

gguf-py's `GGUFReader` turns every element of every array into a numpy view before anything can be read: 2.5 s
for SmolLM2's header (49,152 tokens and 48,900 merges), 12 s for a vocabulary-only GGUF of Llama-3.1. Here an
array is skipped (only its length counted) unless its value is asked for, and values come out as Python objects,
as `ReaderField.contents()` gives them. Every length read from the file is checked against what is left of it
before it is used, so a damaged or truncated file raises `TokenizerLoadError`, never a huge allocation.
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.errors import TokenizerLoadError

GGUF_MAGIC = b"GGUF"
#: GGUF value types: struct codes of the scalar ones; 8 is a string, 9 an array
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
#: Deepest nesting of arrays read (GGUF files nest one level at most)
MAX_DEPTH = 4
#: Most dimensions a tensor may have (ggml: 4)
MAX_DIMS = 8
#: Most elements of an array read as a list (the vocabularies are counted, not read)
MAX_ARRAY = 1 << 16
#: Bytes read at once while skipping an array of strings
CHUNK = 1 << 20
#: The key that sets the tensor data's alignment (32 when absent)
ALIGNMENT_KEY = "general.alignment"


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file: its name, shape in GGUF order (fastest-varying dimension first, so an
    embedding matrix is (width, rows)), ggml type number and byte offset from the start of the data section."""

    name: str
    shape: tuple[int, ...]
    type: int
    offset: int


@dataclass
class GgufHeader:
    """What :func:`read_header` found: the version, every metadata key read (in file order), the values asked
    for, `counts` (the lengths of arrays counted rather than read), the tensor infos and the absolute offset of
    the tensor data (0 when the tensor infos were not read)."""

    version: int
    keys: list[str]
    values: dict[str, Any]
    counts: dict[str, int]
    tensors: list[TensorInfo]
    data_offset: int


class _Reader:
    """Checked reads from a binary file whose size is known."""

    def __init__(self, fh: io.BufferedIOBase) -> None:
        self.fh = fh
        self.end = fh.seek(0, io.SEEK_END)
        fh.seek(0)

    def ahead(self, n: int) -> int:
        """`n`, a length read from the file, once it is known to fit in what is left of the file."""
        if n > self.end - self.fh.tell():
            raise TokenizerLoadError("the GGUF header ends early (a truncated file)")
        return n

    def read(self, n: int) -> bytes:
        return self.fh.read(self.ahead(n))

    def unpack(self, code: str) -> Any:
        return struct.unpack("<" + code, self.read(struct.calcsize(code)))[0]

    def string(self) -> str:
        return self.read(self.unpack("Q")).decode("utf-8", errors="replace")

    def value(self, vtype: int, depth: int = 0, max_array: int = MAX_ARRAY) -> Any:
        """The next value of type `vtype` as a Python object (an array as a list of at most `max_array`)."""
        if vtype in SCALARS:
            return self.unpack(SCALARS[vtype])
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            etype, count = self.array_head(depth)
            if count > max_array:
                raise TokenizerLoadError(
                    f"a GGUF metadata array of {count:,} values (more than {max_array:,} read)"
                )
            return self.elements(etype, count, depth, max_array)
        raise TokenizerLoadError(f"unknown GGUF value type {vtype}: not a GGUF file this app can read")

    def elements(self, etype: int, count: int, depth: int, max_array: int = MAX_ARRAY) -> list:
        """An array's `count` elements of type `etype` as a list."""
        if etype in SCALARS:
            code = SCALARS[etype]
            return list(struct.unpack(f"<{count}{code}", self.read(count * struct.calcsize(code))))
        return [self.value(etype, depth + 1, max_array) for _ in range(count)]

    def skip(self, vtype: int, depth: int = 0) -> int | None:
        """Skip the next value of type `vtype`; an array's length (else None)."""
        if vtype in SCALARS:
            self.fh.seek(self.ahead(struct.calcsize(SCALARS[vtype])), io.SEEK_CUR)
            return None
        if vtype == STRING:
            self.fh.seek(self.ahead(self.unpack("Q")), io.SEEK_CUR)
            return None
        if vtype == ARRAY:
            etype, count = self.array_head(depth)
            self.skip_elements(etype, count, depth)
            return count
        raise TokenizerLoadError(f"unknown GGUF value type {vtype}: not a GGUF file this app can read")

    def skip_elements(self, etype: int, count: int, depth: int) -> None:
        """Skip an array's `count` elements of type `etype`."""
        if etype in SCALARS:
            self.fh.seek(self.ahead(count * struct.calcsize(SCALARS[etype])), io.SEEK_CUR)
        elif etype == STRING:
            self._skip_strings(count)
        else:
            for _ in range(count):
                self.skip(etype, depth + 1)

    def _skip_strings(self, count: int) -> None:
        """Skip `count` strings, walking their lengths in 1 MiB chunks read at once (Llama-3.1's 128,256 tokens
        and 280,147 merges in about 0.1 s; a seek per string took 0.4 s)."""
        fh, end, unpack_from = self.fh, self.end, struct.Struct("<Q").unpack_from
        pos = fh.tell()
        while count:
            buf = fh.read(min(CHUNK, end - pos))
            if len(buf) < 8:
                raise TokenizerLoadError("the GGUF header ends early (a truncated file)")
            off, size = 0, len(buf)
            while count and off + 8 <= size:
                (n,) = unpack_from(buf, off)
                if n > end - (pos + off + 8):
                    raise TokenizerLoadError("the GGUF header ends early (a truncated file)")
                if off + 8 + n > size and off:  # this string runs past the chunk: the next chunk starts at it
                    break
                off += 8 + n
                count -= 1
            pos += off
            fh.seek(pos)

    def array_head(self, depth: int) -> tuple[int, int]:
        """An array's element type and length (checked against what is left of the file)."""
        if depth >= MAX_DEPTH:
            raise TokenizerLoadError(
                f"GGUF arrays nested more than {MAX_DEPTH} deep: not a GGUF file this app can read"
            )
        etype, count = self.unpack("I"), self.unpack("Q")
        # each element takes at least one byte (a string at least its 8-byte length)
        self.ahead(
            count * (8 if etype == STRING else struct.calcsize(SCALARS[etype]) if etype in SCALARS else 1)
        )
        return etype, count


def read_header(
    fh: io.BufferedIOBase,
    wanted: Callable[[str], bool] | Container[str] = (),
    *,
    counted: Container[str] = (),
    arrays: bool = True,
    max_array: int = MAX_ARRAY,
    tensors: bool = True,
    stop_when_found: int | None = None,
) -> GgufHeader:
    """Read a GGUF header from `fh`: the values of the metadata keys `wanted` picks (a container of keys or a
    predicate), the lengths of the arrays named in `counted`, and (with `tensors`) the tensor infos.

    A wanted array is read as a list with `arrays` when it has at most `max_array` elements (a longer one is only
    counted, into `counts`, so a file cannot make a list of a billion numbers; a nested array longer than that is
    a TokenizerLoadError); without `arrays` a wanted array is skipped. With
    `stop_when_found` = n, reading stops once n wanted values are found (no tensor infos then). Raises
    TokenizerLoadError for a file that is not GGUF (version 2 or later) or is cut short."""
    want = wanted if callable(wanted) else wanted.__contains__
    r = _Reader(fh)
    if r.read(4) != GGUF_MAGIC:
        raise TokenizerLoadError("not a GGUF file (the first bytes are not 'GGUF')")
    version = r.unpack("I")
    if version < 2:
        raise TokenizerLoadError(f"GGUF version {version} is too old (version 2 or later is read)")
    n_tensors, n_kv = r.unpack("Q"), r.unpack("Q")
    values: dict[str, Any] = {}
    counts: dict[str, int] = {}
    keys: list[str] = []
    align = 32
    for _ in range(n_kv):
        key = r.string()
        keys.append(key)
        vtype = r.unpack("I")
        if key == ALIGNMENT_KEY and vtype in SCALARS:
            value = r.value(vtype)
            align = value if isinstance(value, int) and value > 0 else 32
            if want(key):
                values[key] = value
        elif want(key) and vtype == ARRAY and arrays:
            etype, count = r.array_head(0)
            if count > max_array:  # counted, not read
                r.skip_elements(etype, count, 0)
                counts[key] = count
            else:
                values[key] = r.elements(etype, count, 0, max_array)
        elif want(key) and vtype != ARRAY:
            values[key] = r.value(vtype, max_array=max_array)
        else:
            n = r.skip(vtype)
            if n is not None and key in counted:
                counts[key] = n
        if stop_when_found is not None and len(values) >= stop_when_found:
            return GgufHeader(version, keys, values, counts, [], 0)
    infos: list[TensorInfo] = []
    if not tensors:
        return GgufHeader(version, keys, values, counts, infos, 0)
    r.ahead(n_tensors * 24)  # each tensor info takes at least 24 bytes
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.unpack("I")
        if n_dims > MAX_DIMS:
            raise TokenizerLoadError(f"GGUF tensor {name!r} has {n_dims} dimensions: not a GGUF file")
        shape = struct.unpack(f"<{n_dims}Q", r.read(8 * n_dims))
        ttype, offset = r.unpack("I"), r.unpack("Q")
        infos.append(TensorInfo(name, tuple(int(d) for d in shape), int(ttype), int(offset)))
    start = fh.tell()
    return GgufHeader(version, keys, values, counts, infos, start + (-start) % align)


def read_gguf_header(path: str | os.PathLike, wanted: Callable[[str], bool] | Container[str] = (),
                     **kwargs: Any) -> GgufHeader:  # fmt: skip
    """:func:`read_header` on the file at `path` (OSError as it comes)."""
    with open(path, "rb") as fh:
        return read_header(fh, wanted, **kwargs)


def tensor_array(path: str | os.PathLike, head: GgufHeader, info: TensorInfo, block: tuple[int, int] | None,
                 dtype: np.dtype | type | None = None) -> np.ndarray:  # fmt: skip
    """The bytes of one tensor as a read-only memory map, shaped as gguf-py shapes them: (rows, width) of `dtype`
    for a plain type, (rows, bytes per row) of uint8 for a quantized one (`block`: values and bytes per block)."""
    width = info.shape[0] if info.shape else 1
    rows = int(np.prod(info.shape[1:], dtype=np.int64)) if len(info.shape) > 1 else 1
    if block is not None:
        per_block, block_bytes = block
        if width % per_block:
            raise TokenizerLoadError(
                f"GGUF tensor {info.name!r}: width {width} is not whole blocks of {per_block}"
            )
        out_dtype, cols = np.dtype(np.uint8), width // per_block * block_bytes
    else:
        if dtype is None:
            raise TokenizerLoadError(f"GGUF tensor {info.name!r}: neither a plain nor a block type")
        out_dtype, cols = np.dtype(dtype), width
    start = head.data_offset + info.offset
    if start + rows * cols * out_dtype.itemsize > os.path.getsize(path):
        raise TokenizerLoadError(
            f"GGUF tensor {info.name!r} runs past the end of the file (a truncated file)"
        )
    return np.memmap(path, dtype=out_dtype, mode="r", offset=start, shape=(rows, cols))
