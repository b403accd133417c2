"""Prune-then-extend and extend-then-prune: the vocabulary size stays constant (Purason, Chizhov, Yamshchikov,
Fishel, "Teaching Old Tokenizers New Words", arXiv 2512.03989, 2025, Table 4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from analysis.errors import DataError
from analysis.methods.extension import plan
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .common import protected_ids, token_counts
from .orders import (
    CORPUS_ORDERS,
    ORDERS,
    PruneOrder,
    frequency_order,
    last_n_order,
    leaf_frequency_order,
    leaf_last_n_order,
    merge_based_order,
)
from .removal import prune_by_order


@dataclass
class PruneExtendResult:
    """The result of pruning and extending by the same number of tokens."""

    tokenizer: LoadedTokenizer
    pruned: list[str]
    added: list[str]
    #: old id → new id for tokens of the original tokenizer that survive
    id_map: dict[int, int]


def _extension_plan(
    base: LoadedTokenizer, texts: Sequence[str], n: int, method: str, max_token_length: int | None
):
    return plan(base, method, list(texts), n, max_token_length=max_token_length)


def prune_then_extend(
    tok: LoadedTokenizer,
    order: PruneOrder,
    n: int,
    extension_texts: Sequence[str],
    *,
    n_extend: int | None = None,
    method: str = "continued",
    max_token_length: int | None = None,
) -> PruneExtendResult:
    """Prune the first n tokens of `order`, then extend by n (default) with continued BPE training.

    Keeps the vocabulary size constant (Purason et al., Table 4). Extension appends ids, so surviving tokens keep
    their pruned ids and `id_map` maps the original ids straight to the final ones.
    """
    res = prune_by_order(tok, order, n)
    k = n if n_extend is None else n_extend
    if k <= 0:
        return PruneExtendResult(res.tokenizer, [tok.id_to_token[i] for i in res.removed], [], res.id_map)
    ext = _extension_plan(res.tokenizer, extension_texts, k, method, max_token_length).apply(k)
    final = ext.tokenizer.with_source(name=f"{tok.name} -{n} ({order.method}) +{ext.n_added} ({method})")
    return PruneExtendResult(final, [tok.id_to_token[i] for i in res.removed], list(ext.added), res.id_map)


def extend_then_prune(
    tok: LoadedTokenizer,
    n: int,
    extension_texts: Sequence[str],
    prune_method: str,
    prune_texts: Sequence[str] | None = None,
    *,
    method: str = "continued",
    protect_new: bool = True,
    max_token_length: int | None = None,
) -> PruneExtendResult:
    """Extend by n tokens first, then prune n with `prune_method` computed on the extended tokenizer.

    With `protect_new` the freshly added tokens are never pruned (only original tokens make room).
    """
    if prune_method in CORPUS_ORDERS and prune_texts is None:
        raise DataError(f"the {prune_method} order needs a text sample")
    ext = _extension_plan(tok, extension_texts, n, method, max_token_length).apply(n)
    et = ext.tokenizer
    prot = protected_ids(et) | (set(ext.added_ids) if protect_new else set())
    counts = token_counts(et, prune_texts) if prune_method in ("frequency", "leaf-frequency") else None
    if prune_method == "last-n":
        order = last_n_order(et, protected=prot)
    elif prune_method == "frequency":
        order = frequency_order(et, counts, protected=prot)
    elif prune_method == "leaf-last-n":
        order = leaf_last_n_order(et, protected=prot)
    elif prune_method == "leaf-frequency":
        order = leaf_frequency_order(et, counts, protected=prot)
    elif prune_method == "merge-based":
        order = merge_based_order(et, prune_texts, protected=prot)
    else:
        raise DataError(f"extend-then-prune supports {', '.join(ORDERS[:5])}; not {prune_method!r}")
    res = prune_by_order(et, order, n)
    # original id → id in the extended tokenizer is the identity (extension appends), then the prune map
    id_map = {o: res.id_map[o] for o in tok.id_to_token if o in res.id_map}
    added = [t for t, i in zip(ext.added, ext.added_ids) if i in res.id_map]
    final = res.tokenizer.with_source(name=f"{tok.name} +{ext.n_added} ({method}) -{n} ({prune_method})")
    return PruneExtendResult(final, [et.id_to_token[i] for i in res.removed], added, id_map)
