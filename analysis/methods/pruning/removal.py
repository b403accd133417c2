"""Removal that keeps the tokenizer valid.

Removing ids drops every merge that touches a pruned token, renumbers model + added ids contiguously in old-id
order, fixes `added_tokens`, the post-processor ids and `added_tokens_decoder`, and returns the old → new id map.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from analysis.core.cache import memoize
from analysis.errors import DataError
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .common import check_prunable, post_processor_tokens
from .orders import PruneOrder


@dataclass
class PruneResult:
    """A pruned tokenizer and how its ids relate to the original's."""

    tokenizer: LoadedTokenizer
    #: old id → new id for every surviving token (model + added)
    id_map: dict[int, int]
    removed: list[int]
    merges_removed: int

    @property
    def id_map_array(self) -> np.ndarray:
        """old id → new id as an array (-1 for pruned ids)."""
        size = max(self.id_map) + 1 if self.id_map else 0
        size = max(size, (max(self.removed) + 1) if self.removed else 0)
        arr = np.full(size, -1, dtype=np.int64)
        for o, n in self.id_map.items():
            arr[o] = n
        return arr


class Pruner:
    """Reusable removal for one tokenizer: parses the document once, then builds pruned copies fast."""

    def __init__(self, tok: LoadedTokenizer) -> None:
        check_prunable(tok)
        self.tok = tok
        self.base = json.loads(tok.to_json())  # private copy; only its top level is reused
        vocab = tok.vocab
        self.size = max(max(vocab.values(), default=-1), max(tok.added_ids, default=-1)) + 1
        self.present = np.zeros(self.size, dtype=bool)
        self.present[list(vocab.values())] = True
        self.present[list(tok.added_ids)] = True
        self.vocab_items = list(vocab.items())
        self.vocab_ids = np.fromiter((i for _, i in self.vocab_items), dtype=np.int64, count=len(vocab))
        merges = tok.merges
        self.merge_lists = [[a, b] for a, b in merges]
        get = vocab.get
        self.merge_ids = np.array(
            [(get(a, -1), get(b, -1), get(a + b, -1)) for a, b in merges], dtype=np.int64
        ).reshape(-1, 3)
        self.added = []
        for entry in self.base.get("added_tokens") or []:
            self.added.append((tok.tokenizer.token_to_id(entry["content"]), entry))
        self.pp_tokens = post_processor_tokens(tok.post_processor)
        self.token_to_id = tok.tokenizer.token_to_id

    def prune(self, remove: Iterable[int], name: str | None = None, validate: bool = True) -> PruneResult:
        """Remove the given ids (see :func:`prune`)."""
        tok = self.tok
        rem_list = sorted({int(i) for i in remove})
        rem = np.zeros(self.size, dtype=bool)
        if rem_list:
            arr = np.asarray(rem_list, dtype=np.int64)
            bad = arr[(arr < 0) | (arr >= self.size)]
            if bad.size == 0:
                bad = arr[~self.present[arr]]
            if bad.size:
                raise DataError(f"ids not in the vocabulary: {bad[:10].tolist()}")
            rem[arr] = True
        needed = self.pp_tokens | ({tok.unk_token} if tok.unk_token else set())
        blocked = [s for s in needed if (i := self.token_to_id(s)) is not None and rem[i]]
        if blocked:
            raise DataError(
                f"cannot prune tokens the tokenizer needs (unk / post-processor): {sorted(blocked)}"
            )
        surv = self.present & ~rem
        new_ids = np.cumsum(surv) - 1  # old id → new id where surv
        survivors = np.flatnonzero(surv)
        id_map = dict(zip(survivors.tolist(), new_ids[survivors].tolist()))
        keep_v = ~rem[self.vocab_ids]
        nv = new_ids[self.vocab_ids].tolist()
        vocab = {t: nv[k] for k, (t, _) in enumerate(self.vocab_items) if keep_v[k]}
        m = self.merge_ids
        if len(m):
            ok = (m >= 0).all(axis=1)
            safe = np.where(m >= 0, m, 0)
            ok &= ~(rem[safe[:, 0]] | rem[safe[:, 1]] | rem[safe[:, 2]])
            kept_idx = np.flatnonzero(ok).tolist()
        else:
            kept_idx = []
        ml = self.merge_lists
        doc = dict(self.base)
        model = dict(self.base["model"])
        model["vocab"] = vocab
        model["merges"] = [ml[k] for k in kept_idx]
        doc["model"] = model
        added = []
        for i, entry in self.added:
            if i is None or rem[i]:
                continue
            e = dict(entry)
            e["id"] = id_map[i]
            added.append(e)
        doc["added_tokens"] = added
        doc["post_processor"] = _remap_post_processor(self.base.get("post_processor"), tok, id_map)
        new = LoadedTokenizer.from_document(
            doc,
            name=name or f"{tok.name}-pruned{len(rem_list)}",
            source=f"pruned from {tok.name}",
            config=_remap_config(tok.config, tok, id_map),
        )
        if validate:
            _validate(new, tok, id_map)
        return PruneResult(new, id_map, rem_list, len(ml) - len(kept_idx))


def _remap_post_processor(pp, tok: LoadedTokenizer, id_map: dict[int, int]):
    """A copy of the post-processor with every stored id moved to its new id."""
    if not isinstance(pp, dict):
        return pp
    pp = json.loads(json.dumps(pp))

    def new_id(s: str, old: int | None = None) -> int:
        i = tok.tokenizer.token_to_id(s)
        if i is None:
            i = old
        return id_map[i]

    def walk(node: dict) -> None:
        if node.get("type") == "Sequence":
            for p in node.get("processors") or []:
                walk(p)
            return
        for key in ("cls", "sep"):
            if isinstance(node.get(key), list) and len(node[key]) == 2:
                node[key][1] = new_id(node[key][0], node[key][1])
        for spec in (node.get("special_tokens") or {}).values():
            toks = spec.get("tokens") or []
            ids = spec.get("ids") or []
            spec["ids"] = [new_id(t, o) for t, o in zip(toks, ids)]

    walk(pp)
    return pp


def _remap_config(config: dict, tok: LoadedTokenizer, id_map: dict[int, int]) -> dict:
    """tokenizer_config.json with `added_tokens_decoder` keyed by the new ids (pruned entries dropped)."""
    cfg = dict(config)
    dec = cfg.get("added_tokens_decoder")
    if isinstance(dec, dict):
        new_dec = {}
        for k, v in dec.items():
            try:
                old = int(k)
            except ValueError:
                continue
            if old in id_map:
                new_dec[str(id_map[old])] = v
        cfg["added_tokens_decoder"] = new_dec
    return cfg


def _validate(new: LoadedTokenizer, old: LoadedTokenizer, id_map: dict[int, int]) -> None:
    """Check that every surviving token string has exactly its mapped id and ids are contiguous."""
    n = len(id_map)
    if new.vocab_size != n:
        raise AssertionError(f"pruned vocab size {new.vocab_size} != survivors {n}")
    t = new.tokenizer
    for o, nid in id_map.items():
        if t.id_to_token(nid) != old.id_to_token[o]:
            raise AssertionError(f"id {o} → {nid}: {old.id_to_token[o]!r} became {t.id_to_token(nid)!r}")


def prune(
    tok: LoadedTokenizer, remove: Iterable[int], *, name: str | None = None, validate: bool = True
) -> PruneResult:
    """Remove the given ids: drop merges touching them, renumber contiguously, fix added tokens + post-processor."""
    return pruner_for(tok).prune(remove, name=name, validate=validate)


@memoize(maxsize=2)
def pruner_for(tok: LoadedTokenizer) -> Pruner:
    """The tokenizer's :class:`Pruner`, built once (its parse is a second on a 150k vocabulary) and shared: a
    Pruner never changes after construction."""
    return Pruner(tok)


def prune_by_order(
    tok: LoadedTokenizer, order: PruneOrder, n: int, *, name: str | None = None
) -> PruneResult:
    """Remove the first n ids of an order."""
    if order.tokenizer_hash != tok.content_hash:
        raise DataError("this pruning order was computed for another tokenizer")
    return prune(tok, order.prefix(n), name=name)
