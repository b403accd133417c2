"""Keyed counts on disk between the map, reduce and final stages of a corpus job: columnar, never pickled.

One ``.npz`` file (numpy's zip of ``.npy`` arrays, read with ``allow_pickle=False``) per part or reduced bucket:

* ``counts`` — int64, one per key;
* ``kind`` — 0: every key is a string (pre-tokens); 1: every key is a tuple of strings; 3: every key is a tuple
  of ints (segmented words as vocabulary ids); 2: anything else (ids, mixed tuples), stored as the JSON text of
  ``[[key, count], …]`` in ``json``;
* kinds 0 and 1: ``text`` — every string of every key as UTF-8 (lone surrogates pass through), joined by one
  separator character that occurs in none of them (``sep``, its code point; -1: none could be chosen, the
  strings are cut by ``lens``, each one's length in characters); kind 1 also ``arity`` — the number of strings
  of each key;
* kind 3: ``ids`` — every id of every key (int32, or int64 when an id does not fit), and ``arity``.

Writing is a few C-level joins and one array per column; reading is one decode and one ``str.split`` (or one
slice per string), and ids are mapped to strings by one array lookup (:func:`read_counts`' `symbols`).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import accumulate, chain, islice
from pathlib import Path
from typing import Any

import numpy as np

from analysis.core.outputs import atomic_write_bytes
from analysis.errors import DataError

#: the file suffix of a counts file
SUFFIX = ".npz"
_STR, _TUPLE, _JSON, _IDS = 0, 1, 2, 3
#: separators tried in order: the first one that occurs in none of the strings joins them
_SEPARATORS = ("\x00", "\x01", "\ufffe", "\uffff", "\U0010fffe")


def _text_columns(strings: Sequence[str]) -> dict[str, np.ndarray] | None:
    """The `text` (+ `sep`, or `lens`) arrays of some strings; None if one of them is not a string."""
    try:
        for sep in _SEPARATORS:
            text = sep.join(strings)  # a C-level join that also type-checks every item
            if not strings or text.count(sep) == len(strings) - 1:
                return {
                    "text": np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8),
                    "sep": np.int64(ord(sep)),
                }
    except TypeError:
        return None
    lens = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    return {
        "text": np.frombuffer("".join(strings).encode("utf-8", "surrogatepass"), dtype=np.uint8),
        "lens": lens,
    }


def _columns(keys: Sequence[Any]) -> tuple[int, dict[str, np.ndarray]]:
    """(kind, arrays) for the keys (see the module docstring)."""
    if keys and type(keys[0]) is str:
        cols = _text_columns(keys)
        return (_STR, cols) if cols is not None else (_JSON, {})
    if keys and set(map(type, keys)) != {tuple}:
        return _JSON, {}
    arity = {"arity": np.fromiter(map(len, keys), dtype=np.int32, count=len(keys))}
    flat = list(chain.from_iterable(keys))
    if flat and type(flat[0]) is int:
        try:
            ids = np.array(flat)  # int64 only when every item is an integer (floats, strings: another dtype)
        except (TypeError, ValueError, OverflowError):
            return _JSON, {}
        if ids.dtype != np.int64:  # (a bool reads back as 0/1: an equal key with the same hash)
            return _JSON, {}
        if ids.min() >= 0 and ids.max() < 2**31:
            ids = ids.astype(np.int32)
        return _IDS, {"ids": ids, **arity}
    cols = _text_columns(flat)
    return (_TUPLE, {**cols, **arity}) if cols is not None else (_JSON, {})


def write_counts(path: Path, keys: Sequence[Any], counts: Sequence[int]) -> int:
    """Write keyed counts (atomically); returns the file's size in bytes."""
    kind, arrays = _columns(keys)
    if kind == _JSON:
        body = json.dumps([[k, int(c)] for k, c in zip(keys, counts)], ensure_ascii=False)
        arrays = {"json": np.frombuffer(body.encode("utf-8", "surrogatepass"), dtype=np.uint8)}
    buf = io.BytesIO()
    np.savez(buf, kind=np.int8(kind), counts=np.asarray(counts, dtype=np.int64), **arrays)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = buf.getvalue()
    atomic_write_bytes(path, data)
    return len(data)


def _strings(z: Any, n: int) -> list[str]:
    """The `n` strings of kinds 0 and 1."""
    text = bytes(z["text"]).decode("utf-8", "surrogatepass")
    if "sep" in z.files:
        out = text.split(chr(int(z["sep"]))) if n else []
        if len(out) != n:
            raise ValueError(f"{len(out)} strings for {n}")
        return out
    ends = list(accumulate(z["lens"].tolist()))
    return [text[a:b] for a, b in zip([0, *ends[:-1]], ends)]


def _keys(kind: int, z: Any, n: int, intern: Mapping[str, str] | None, symbols: Any) -> list[Any]:
    """The `n` keys of an opened counts file."""
    if kind == _JSON:
        items = json.loads(bytes(z["json"]).decode("utf-8", "surrogatepass"))
        return [tuple(k) if isinstance(k, list) else k for k, _ in items]
    if kind == _STR:
        return _strings(z, n)
    arity = z["arity"]
    if len(arity) != n:
        raise ValueError(f"{len(arity)} keys for {n} counts")
    if kind == _IDS:
        ids = z["ids"]
        if symbols is not None:  # ids → the symbol table's own strings, in one array lookup
            if len(ids) and (ids.min() < 0 or ids.max() >= len(symbols)):
                raise ValueError("an id outside the symbol table")
            if len(ids) and (symbols == None)[ids].any():  # noqa: E711 (elementwise on the object array)
                raise ValueError("an id with no symbol (not a model token)")
            flat = symbols[ids].tolist()
        else:
            flat = ids.tolist()
    else:
        flat = _strings(z, int(arity.sum()))
        if intern is not None:  # the vocabulary's own strings: one object per symbol, not per occurrence
            get = intern.get
            flat = [get(s, s) for s in flat]
    it = iter(flat)
    return [tuple(islice(it, k)) for k in arity.tolist()]


def read_counts(
    path: Path,
    into: Counter | None = None,
    *,
    intern: Mapping[str, str] | None = None,
    symbols: np.ndarray | None = None,
) -> Counter:
    """Add the counts of a counts file to a Counter (a new one by default).

    `intern` maps strings of tuple keys to the objects to use (e.g. a vocabulary's own strings); `symbols` (an
    object array, id → string) turns keys stored as tuples of ids into tuples of those strings. DataError for a
    missing or corrupt file.
    """
    c = into if into is not None else Counter()
    try:
        with np.load(path, allow_pickle=False) as z:
            kind = int(z["kind"])
            counts = z["counts"].tolist()
            keys = _keys(kind, z, len(counts), intern, symbols)
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, zipfile.BadZipFile) as e:
        raise DataError(f"{path}: unreadable partial counts ({e}); rerun the job with --restart") from e
    if len(keys) != len(counts):
        raise DataError(f"{path}: {len(keys)} keys for {len(counts)} counts; rerun the job with --restart")
    if not c:  # into an empty counter: one C-level build (a copy of its table)
        d = dict(zip(keys, counts))
        if len(d) == len(keys):
            dict.update(c, d)
            return c
    # one lookup and one store per key: fewer hashings than building, intersecting and merging dicts (a tuple
    # key's hash is not cached); also adds up a key written twice in one file (not by this module)
    get = c.get
    for k, n in zip(keys, counts):
        c[k] = get(k, 0) + n
    return c
