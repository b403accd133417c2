"""Pruning curves: bytes/token per language and the STT-unreachable count for many N of one order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any

import numpy as np
from tokenizers.models import BPE

from analysis.core.progress import Progress, report
from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .common import check_prunable
from .orders import PruneOrder


@dataclass
class CurvePoint:
    """Metrics of the tokenizer pruned by the first `n` tokens of an order."""

    n: int
    vocab_size: int
    bytes_per_token: dict[str, float]
    unreachable: int | None


def prune_curve(
    tok: LoadedTokenizer,
    order: PruneOrder,
    ns: Sequence[int],
    eval_texts: Mapping[str, Sequence[str]],
    *,
    stt: bool = True,
    progress: Progress | None = None,
) -> list[CurvePoint]:
    """Bytes/token per language (and STT-unreachable count) for each N of one order.

    Fast path: ids are not renumbered (bytes/token and reachability do not depend on them), so each point
    only builds a new Rust BPE model from the surviving vocabulary and merges and swaps it into one private
    copy of the tokenizer; the JSON document is never re-serialised or re-parsed.
    """
    if order.tokenizer_hash != tok.content_hash:
        raise DataError("this pruning order was computed for another tokenizer")
    fast = _FastPruner(tok)
    texts = {k: [ln for ln in v if ln] for k, v in eval_texts.items()}
    n_bytes = {k: sum(len(ln.encode("utf-8")) for ln in v) for k, v in texts.items()}
    for k, v in texts.items():
        if not v:
            raise DataError(f"no text to measure bytes/token on for {k}")
    out = []
    ns = sorted(set(int(n) for n in ns))
    for j, n in enumerate(ns):
        rust, kept = fast.tokenizer(order.prefix(n))
        bpt = {}
        for k, lines in texts.items():
            enc = rust.encode_batch_fast(lines, add_special_tokens=False)
            n_tok = sum(len(e.ids) for e in enc)
            bpt[k] = n_bytes[k] / n_tok if n_tok else float("nan")
        unreach = fast.unreachable_count(rust, kept) if stt else None
        out.append(CurvePoint(n, tok.vocab_size - n, bpt, unreach))
        report(progress, j + 1, len(ns), f"N = {n:,}")
    return out


class _FastPruner:
    """Swap pruned BPE models into one private tokenizer copy (original ids kept) for fast measurements."""

    def __init__(self, tok: LoadedTokenizer) -> None:
        check_prunable(tok)
        self.tok = tok
        self.rust = tok.fresh_tokenizer()
        m = tok.model
        self.kwargs = dict(
            unk_token=m.get("unk_token"),
            continuing_subword_prefix=m.get("continuing_subword_prefix"),
            end_of_word_suffix=m.get("end_of_word_suffix"),
            fuse_unk=bool(m.get("fuse_unk", False)),
            byte_fallback=bool(m.get("byte_fallback", False)),
        )
        self.kwargs = {k: v for k, v in self.kwargs.items() if v is not None}
        self.ignore_merges = bool(m.get("ignore_merges", False))
        self.BPE = BPE
        vocab = tok.vocab
        self.vocab_items = list(vocab.items())
        self.vocab_ids = np.fromiter((i for _, i in self.vocab_items), dtype=np.int64, count=len(vocab))
        self.size = max(tok.id_to_token) + 1
        self.merges = tok.merges
        get = vocab.get
        self.merge_ids = np.array(
            [(get(a, -1), get(b, -1), get(a + b, -1)) for a, b in self.merges], dtype=np.int64
        ).reshape(-1, 3)
        excl = set(tok.added_ids)
        added_contents = {a.content for a in tok.added_tokens}
        for s, i in vocab.items():
            if s in added_contents or s == tok.unk_token or tok.is_byte_piece(s):
                excl.add(i)
        self.excluded = excl

    def model(self, remove: Iterable[int], ignore_merges: bool | None = None) -> Any:
        """A BPE model without the removed ids (and every merge touching them); ids unchanged."""
        rem = np.zeros(self.size, dtype=bool)
        r = list(remove)
        if r:
            rem[np.asarray(r, dtype=np.int64)] = True
        keep_v = (~rem[self.vocab_ids]).tolist()
        vocab = dict(compress(self.vocab_items, keep_v))
        mi = self.merge_ids
        ok = (mi >= 0).all(axis=1)
        safe = np.where(mi >= 0, mi, 0)
        ok &= ~(rem[safe[:, 0]] | rem[safe[:, 1]] | rem[safe[:, 2]])
        merges = list(compress(self.merges, ok.tolist()))
        im = self.ignore_merges if ignore_merges is None else ignore_merges
        return self.BPE(vocab, merges, ignore_merges=im, **self.kwargs), vocab

    def tokenizer(self, remove: Iterable[int]) -> Any:
        """The private tokenizer copy with the pruned model swapped in, plus the surviving vocabulary."""
        model, vocab = self.model(remove)
        self.rust.model = model
        return self.rust, vocab

    def unreachable_count(self, rust: Any, vocab: dict[str, int]) -> int:
        """STT on the swapped-in model (ignore_merges off, no dropout): the analysis.bpe.stt rules."""
        model = rust.model
        was = model.ignore_merges
        model.ignore_merges = False
        try:
            excl = self.excluded
            bad = 0
            for s, i in vocab.items():
                if i in excl:
                    continue
                toks = model.tokenize(s)
                if len(toks) != 1 or toks[0].id != i:
                    bad += 1
            return bad
        finally:
            model.ignore_merges = was


def curve_points(max_n: int, k: int = 20) -> list[int]:
    """k evenly spaced N from 0 to max_n (inclusive)."""
    if max_n <= 0:
        return [0]
    return sorted({round(max_n * j / (k - 1)) for j in range(k)}) if k > 1 else [max_n]
