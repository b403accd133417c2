"""An embedding matrix in its stored dtype (:class:`Matrix`: float32 rows on demand, in blocks) and the input and
output embeddings of one checkpoint (:class:`EmbeddingWeights`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.errors import ModelLoadError

#: Storage dtypes we can turn into float32 rows.
STORED_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,  # converted by bit shift
    "F8_E4M3": np.uint8,  # converted through torch
    "F8_E5M2": np.uint8,
}


class Matrix:
    """A 2-D weight matrix in its stored dtype (often memory-mapped); float32 rows on demand."""

    def __init__(self, raw: np.ndarray, dtype: str, name: str = "") -> None:
        if raw.ndim != 2:
            raise ModelLoadError(f"tensor {name!r} is not a matrix (shape {tuple(raw.shape)})")
        self.raw = raw
        self.dtype = dtype
        self.name = name

    def __repr__(self) -> str:
        return f"Matrix({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns)."""
        return (int(self.raw.shape[0]), int(self.raw.shape[1]))

    @property
    def nbytes(self) -> int:
        """Bytes of the stored matrix."""
        return int(self.raw.nbytes)

    def _to_f32(self, a: np.ndarray) -> np.ndarray:
        if self.dtype == "BF16":
            return (a.astype(np.uint32) << 16).view(np.float32)
        if self.dtype in ("F8_E4M3", "F8_E5M2"):
            import torch  # noqa: PLC0415 - heavy, loaded on use

            tdt = torch.float8_e4m3fn if self.dtype == "F8_E4M3" else torch.float8_e5m2
            return torch.from_numpy(np.ascontiguousarray(a)).view(tdt).float().numpy()
        return np.asarray(a, dtype=np.float32)

    def block(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) as a new float32 array."""
        out = self._to_f32(self.raw[start:stop])
        if np.may_share_memory(out, self.raw):  # float32 storage: a view, so copy (callers edit blocks)
            out = np.array(out, dtype=np.float32, copy=True)
        return out

    def take(self, ids: Any) -> np.ndarray:
        """The given rows as float32 (any order)."""
        ids = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.shape[0]):
            raise ModelLoadError(f"row ids out of range for {self.name} with {self.shape[0]} rows")
        return np.array(self._to_f32(self.raw[ids]), dtype=np.float32)

    def blocks(self, rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (start, float32 block) over all rows; blocks of about 64 MB by default."""
        n, d = self.shape
        rows = rows or max(1, (1 << 24) // max(1, d))
        for s in range(0, n, rows):
            yield s, self.block(s, min(n, s + rows))

    def to_numpy(self) -> np.ndarray:
        """The whole matrix as float32 (allocates rows × cols × 4 bytes)."""
        out = np.empty(self.shape, dtype=np.float32)
        for s, b in self.blocks():
            out[s : s + len(b)] = b
        return out

    def equals(self, other: Matrix) -> bool:
        """Whether two matrices hold the same values (compared block by block)."""
        if self.shape != other.shape:
            return False
        if self.raw is other.raw:
            return True
        for s, b in self.blocks():
            if not np.array_equal(b, other.block(s, s + len(b))):
                return False
        return True


@dataclass
class EmbeddingWeights:
    """The embedding matrices of one checkpoint, plus what we know about how they are used."""

    input: Matrix | None
    output: Matrix | None
    bias: np.ndarray | None
    tied: bool
    has_lm_head: bool
    format: str
    files: list[str]
    config: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def unembedding(self) -> Matrix:
        """The matrix the cosine/L2 indicators use: the LM head, else the input embeddings."""
        m = self.output if self.output is not None else self.input
        assert m is not None
        return m

    @property
    def n_rows(self) -> int:
        """Rows of the (un)embedding matrix."""
        return self.unembedding.shape[0]

    @property
    def dim(self) -> int:
        """Embedding width."""
        return self.unembedding.shape[1]

    def summary(self) -> dict[str, Any]:
        """JSON-friendly facts (shapes, dtypes, tied, files)."""
        return {
            "format": self.format,
            "files": self.files,
            "tied": self.tied,
            "has_lm_head": self.has_lm_head,
            "input": None
            if self.input is None
            else {"name": self.input.name, "shape": self.input.shape, "dtype": self.input.dtype},
            "output": None
            if self.output is None
            else {"name": self.output.name, "shape": self.output.shape, "dtype": self.output.dtype},
            "bias": self.bias is not None,
            "architectures": self.config.get("architectures"),
            "notes": self.notes,
        }
