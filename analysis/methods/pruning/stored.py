"""Pruning orders kept in the disk store: computed once per tokenizer content and inputs, then read back.

An order of a 150k vocabulary takes seconds (leaf frequency walks the merge graph); the same tokenizer, method
and inputs always give the same order, so :func:`stored_order` keys it by the tokenizer's content hash, every
input of :func:`~.orders.compute_order` and :data:`ORDER_STORE_VERSION`, and a second session, another process or
a restarted server reads it back instead of computing it again. A missing, foreign or malformed document is a
miss (JSON only, never unpickled).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from analysis.core.cache import DiskCache, memoize
from analysis.tokenizer.tokenizer import LoadedTokenizer

from . import orders as _orders
from .orders import PruneOrder

#: format of a stored order (bump when an order's algorithm or the protected ids change)
ORDER_STORE_VERSION = 1
_STORE = DiskCache("prune-order", ORDER_STORE_VERSION)


def _feed(h: Any, value: Any) -> None:
    """Hash one input unambiguously (type tag, length, content)."""
    if value is None:
        h.update(b"N")
    elif isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        h.update(f"A{arr.dtype.str}{arr.shape}".encode())
        h.update(arr.tobytes())
    elif isinstance(value, Mapping):
        items = sorted((int(k), float(v)) for k, v in value.items())
        h.update(f"M{len(items)}".encode())
        h.update(json.dumps(items).encode())
    elif isinstance(value, str):
        b = value.encode("utf-8", "surrogatepass")
        h.update(f"S{len(b)}:".encode())
        h.update(b)
    elif isinstance(value, (list, tuple)):
        h.update(f"L{len(value)}".encode())
        for v in value:
            _feed(h, v)
    else:
        h.update(f"V{value!r}".encode())


def order_key(
    tok: LoadedTokenizer,
    method: str,
    texts: Sequence[str] | None = None,
    *,
    counts: np.ndarray | None = None,
    merges: tuple[Counter, Counter] | None = None,
    allowed_scripts: Iterable[str] = ("Latin",),
    forbidden_scripts: Iterable[str] = (),
    scores: Mapping[int, float] | np.ndarray | None = None,
    keep_added: bool = True,
    keep_alphabet: bool = True,
) -> str:
    """The store key of one order: a digest of the tokenizer's content hash and every input that shapes it."""
    h = hashlib.sha256()
    merge_items = None
    if merges is not None:
        merge_items = [sorted((repr(k), int(v)) for k, v in c.items()) for c in merges]
    for v in (
        ORDER_STORE_VERSION,
        tok.content_hash,
        method,
        None if texts is None else list(texts),
        counts,
        None if merge_items is None else json.dumps(merge_items),
        list(allowed_scripts),
        list(forbidden_scripts),
        scores,
        bool(keep_added),
        bool(keep_alphabet),
    ):
        _feed(h, v)
    return h.hexdigest()


def _to_doc(order: PruneOrder) -> dict[str, Any] | None:
    """The stored form (None when a key is not a finite number: such an order is not stored)."""
    keys = [[int(i), float(v)] for i, v in order.keys.items()]
    if not all(math.isfinite(v) for _, v in keys):
        return None
    return {
        "method": order.method,
        "tokenizer": order.tokenizer_hash,
        "ids": [int(i) for i in order.ids],
        "keys": keys,
    }


def _from_doc(doc: Any, tok: LoadedTokenizer, method: str) -> PruneOrder | None:
    """The order a stored document holds, or None when it is not one of this tokenizer's `method` orders."""
    if not isinstance(doc, dict) or doc.get("method") != method or doc.get("tokenizer") != tok.content_hash:
        return None
    try:
        ids = tuple(int(i) for i in doc["ids"])
        keys = {int(i): float(v) for i, v in doc["keys"]}
    except (KeyError, TypeError, ValueError):
        return None
    known = tok.id_to_token
    if len(set(ids)) != len(ids) or not all(i in known for i in ids):
        return None
    return PruneOrder(method, ids, tok.content_hash, keys)


class _NotStored(LookupError):
    """No usable stored order under a key (a miss is not remembered: the order may be stored later)."""


@memoize(maxsize=16)
def _read_order(key: str, tok: LoadedTokenizer, method: str) -> PruneOrder:
    """The order stored under `key`, read from disk once per process (raises :class:`_NotStored` on a miss)."""
    order = _from_doc(_STORE.get(key), tok, method)
    if order is None:
        raise _NotStored(key)
    return order


def stored_order(
    tok: LoadedTokenizer, method: str, texts: Sequence[str] | None = None, **inputs: Any
) -> PruneOrder:
    """:func:`~.orders.compute_order` through the disk store: read back when this tokenizer content and these
    inputs (:func:`~.orders.compute_order`'s keywords) were ordered before (by any process), else computed and
    stored. Orders read or computed in this process are also kept in memory (the last 16)."""
    for k in ("allowed_scripts", "forbidden_scripts"):  # read twice (key, computation): no one-shot iterators
        if k in inputs:
            inputs[k] = tuple(inputs[k])
    key = order_key(tok, method, texts, **inputs)
    try:
        return _read_order(key, tok, method)
    except _NotStored:
        pass
    order = _orders.compute_order(tok, method, texts, **inputs)
    doc = _to_doc(order)
    if doc is not None:
        _STORE.put(key, doc)
    _read_order.cache_put((key, tok, method), order)
    return order
