"""The model follows the merged tokens: FVT embedding rows for the tokens a batch merged (Gee et al., EMNLP 2022
Industry Track, "Fast Vocabulary Transfer for Language Model Compression"), their cost and their export."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save as safetensors_save

from analysis.adapt.fvt import fvt_pieces, fvt_rows
from analysis.bpe import bare_tokenize_fn
from analysis.core.outputs import (
    atomic_folder,
    atomic_write_bytes,
    atomic_write_text,
    json_ready,
    strict_json,
)
from analysis.errors import DataError
from analysis.model.source import ModelSource
from analysis.model.weights import load_embeddings
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .report import DynamicResult


# --------------------------------------------------------------------------------------------------
# FVT embeddings
# --------------------------------------------------------------------------------------------------
def fvt_embeddings(tok: LoadedTokenizer, tokens: list[str], matrix: Any) -> Any:
    """FVT rows for (merged) token strings: the mean of the matrix rows of each one's base pieces
    (:func:`analysis.adapt.fvt.fvt_pieces` / :func:`analysis.adapt.fvt.fvt_rows`; torch or numpy in and out).

    A token with no pieces or a piece id outside the matrix gets the unk row (the mean of all rows when the
    tokenizer has no unk token or it lies outside the matrix).
    """
    if not type(matrix).__module__.startswith("torch"):
        matrix = np.asarray(matrix)
    if matrix.ndim != 2:
        raise DataError(f"the embedding matrix must be 2-D, got shape {tuple(matrix.shape)}")
    n_rows = matrix.shape[0]
    unk_id = tok.vocab.get(tok.unk_token) if tok.unk_token else None
    if unk_id is not None and unk_id < n_rows:
        fallback = matrix[unk_id]
    else:
        fallback = matrix.float().mean(0) if hasattr(matrix, "float") else matrix.mean(axis=0)
    tokenize = bare_tokenize_fn(tok)
    return fvt_rows(matrix, [fvt_pieces(tok, t, tokenize=tokenize) for t in tokens], fallback)


@dataclass
class BatchEmbeddings:
    """The rows a model needs for one dynamically tokenized batch (:func:`batch_fvt_embeddings`) and the cost."""

    #: the batch's unique tokens after merging (first appearance), one row each
    tokens: list[str]
    #: per token: True when it is a merged token (its row computed by FVT)
    merged: list[bool]
    #: float32 rows (len(tokens) × dim)
    rows: np.ndarray
    #: merged token → the original tokenizer's ids whose rows were averaged
    pieces: dict[str, list[int]]
    model_rows: int
    model_bytes: int
    read_seconds: float
    seconds: float
    lengths_before: list[int]
    lengths_after: list[int]
    #: the model as it was named (a path or hub id)
    model: str = ""

    def report(self) -> dict[str, Any]:
        """The model, the sequence-length saving next to the cost (rows computed, time, memory of the new
        rows): the ``embeddings`` of :class:`DynamicReport`."""
        n_new = sum(self.merged)
        dim = int(self.rows.shape[1]) if self.rows.ndim == 2 else 0
        before, after = sum(self.lengths_before), sum(self.lengths_after)
        sq_before = sum(n * n for n in self.lengths_before)
        sq_after = sum(n * n for n in self.lengths_after)
        return {
            "model": self.model,
            "tokens_before": before,
            "tokens_after": after,
            "tokens_saved": before - after,
            "reduction_pct": 100.0 * (before - after) / before if before else 0.0,
            "attention_cost_reduction_pct": 100.0 * (sq_before - sq_after) / sq_before if sq_before else 0.0,
            "unique_tokens": len(self.tokens),
            "rows_computed": n_new,
            "dim": dim,
            "new_rows_bytes": n_new * dim * 4,
            "batch_rows_bytes": len(self.tokens) * dim * 4,
            "model_rows": self.model_rows,
            "model_embedding_bytes": self.model_bytes,
            "fvt_seconds": self.seconds,
            "read_seconds": self.read_seconds,
        }

    def save(self, folder: str | os.PathLike, *, replace: bool = False) -> str:
        """Write ``embeddings.safetensors`` (one float32 row per unique token) and ``tokens.json`` (tokens, merged
        flags, FVT pieces, the report) to a new folder, atomically; returns its absolute path."""
        with atomic_folder(folder, replace=replace) as tmp:
            atomic_write_bytes(tmp / "embeddings.safetensors", safetensors_save({"embeddings": self.rows}))
            out = str(Path(folder).resolve())
            doc = {"tokens": self.tokens, "merged": self.merged, "pieces": self.pieces,
                   "report": {**self.report(), "out": out}}  # fmt: skip
            atomic_write_text(tmp / "tokens.json", strict_json(json_ready(doc), indent=None))
        return out


def batch_fvt_embeddings(
    result: DynamicResult, tok: LoadedTokenizer, source: str | os.PathLike | ModelSource
) -> BatchEmbeddings:
    """The embedding rows a model needs for one dynamically tokenized batch, and what they cost.

    Every unique token of the batch gets a row: an unmerged token its own row of the model's input embeddings,
    a merged token the FVT mean of its pieces' rows (:func:`fvt_embeddings`). Only the rows needed are read from
    the checkpoint (:func:`analysis.model.weights.load_embeddings`, memory-mapped where the format allows)."""
    t0 = time.perf_counter()
    weights = load_embeddings(source)
    matrix = weights.input
    if matrix is None:
        raise DataError("the model has no input embedding matrix")
    read_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    base: dict[str, int] = {}
    merged: list[str] = []
    for k, seq in enumerate(result.tokens):
        for tok_str, (a, b) in zip(seq, result.spans[k]):
            if b - a == 1:
                base.setdefault(tok_str, result.base_ids[k][a])
            elif tok_str not in base:
                merged.append(tok_str)
    unique = list(dict.fromkeys(t for seq in result.tokens for t in seq))
    merged = list(dict.fromkeys(t for t in merged if t not in base))
    tokenize = bare_tokenize_fn(tok)
    pieces = {t: fvt_pieces(tok, t, tokenize=tokenize) for t in merged}
    n_rows, dim = matrix.shape
    needed = sorted({i for t in unique for i in ([base[t]] if t in base else pieces[t]) if 0 <= i < n_rows})
    local = {i: k for k, i in enumerate(needed)}
    rows_src = matrix.take(needed)
    unk = tok.vocab.get(tok.unk_token) if tok.unk_token else None
    fallback = matrix.take([unk])[0] if unk is not None and unk < n_rows else None
    plist = [[local[i] for i in ([base[t]] if t in base else pieces[t]) if i in local] for t in unique]
    if fallback is None and any(not p for p in plist):
        fallback = sum(b.sum(axis=0) for _, b in matrix.blocks()) / n_rows
    rows = fvt_rows(rows_src, plist, fallback if fallback is not None else np.zeros(dim, np.float32))
    seconds = time.perf_counter() - t0
    return BatchEmbeddings(
        tokens=unique,
        merged=[t not in base for t in unique],
        rows=np.asarray(rows, dtype=np.float32),
        pieces={t: pieces[t] for t in merged},
        model_rows=n_rows,
        model_bytes=matrix.nbytes,
        read_seconds=read_s,
        seconds=seconds,
        lengths_before=result.lengths_before,
        lengths_after=result.lengths_after,
        model=source.label if isinstance(source, ModelSource) else str(source),
    )
