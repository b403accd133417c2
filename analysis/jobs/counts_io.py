"""Keyed counts on disk between the map, reduce and final stages of a corpus job: columnar, never pickled.

One ``.npz`` file (numpy's zip of ``.npy`` arrays, read with ``allow_pickle=False``) per part or reduced bucket:

* ``counts`` — int64, one per key;
* ``kind`` — 0: every key is a string (pre-tokens); 1: every key is a tuple of strings (segmented words);
  2: anything else (ids, mixed tuples), stored as the JSON text of ``[[key, count], …]`` in ``json``;
* kinds 0 and 1: ``text`` — every string of every key, concatenated, as UTF-8 (lone surrogates pass through);
  ``lens`` — each string's length in characters; kind 1 also ``arity`` — the number of strings of each key.

Writing is a few C-level joins and one array per column, reading one decode and one slice per string, where
JSON parsed and built a list per key (a million pre-tokens: seconds each way).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import accumulate, islice
from pathlib import Path
from typing import Any

import numpy as np

from analysis.core.outputs import atomic_write_bytes
from analysis.errors import DataError

#: the file suffix of a counts file
SUFFIX = ".npz"
_STR, _TUPLE, _JSON = 0, 1, 2


def _columns(keys: Sequence[Any]) -> tuple[int, dict[str, np.ndarray]]:
    """(kind, arrays) for the keys (see the module docstring)."""
    if all(type(k) is str for k in keys):
        strings: Sequence[str] = keys
        kind, extra = _STR, {}
    elif all(type(k) is tuple for k in keys):
        strings = [s for k in keys for s in k]
        if not all(type(s) is str for s in strings):
            return _JSON, {}
        kind = _TUPLE
        extra = {"arity": np.fromiter(map(len, keys), dtype=np.int32, count=len(keys))}
    else:
        return _JSON, {}
    text = "".join(strings).encode("utf-8", "surrogatepass")
    lens = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    return kind, {"text": np.frombuffer(text, dtype=np.uint8), "lens": lens, **extra}


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


def _keys(kind: int, z: Any, intern: Mapping[str, str] | None) -> list[Any]:
    """The keys of an opened counts file."""
    if kind == _JSON:
        items = json.loads(bytes(z["json"]).decode("utf-8", "surrogatepass"))
        return [tuple(k) if isinstance(k, list) else k for k, _ in items]
    text = bytes(z["text"]).decode("utf-8", "surrogatepass")
    ends = list(accumulate(z["lens"].tolist()))
    starts = [0, *ends[:-1]]
    strings = [text[a:b] for a, b in zip(starts, ends)]
    if kind == _STR:
        return strings
    if intern is not None:  # the vocabulary's own string objects: one object per symbol, not per occurrence
        get = intern.get
        strings = [get(s, s) for s in strings]
    it = iter(strings)
    return [tuple(islice(it, n)) for n in z["arity"].tolist()]


def read_counts(
    path: Path, into: Counter | None = None, *, intern: Mapping[str, str] | None = None
) -> Counter:
    """Add the counts of a counts file to a Counter (a new one by default); `intern` maps strings of tuple keys
    to the objects to use (e.g. a vocabulary's own strings). DataError for a missing or corrupt file."""
    c = into if into is not None else Counter()
    try:
        with np.load(path, allow_pickle=False) as z:
            kind = int(z["kind"])
            counts = z["counts"].tolist()
            keys = _keys(kind, z, intern)
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, zipfile.BadZipFile) as e:
        raise DataError(f"{path}: unreadable partial counts ({e}); rerun the job with --restart") from e
    if len(keys) != len(counts):
        raise DataError(f"{path}: {len(keys)} keys for {len(counts)} counts; rerun the job with --restart")
    if not c:
        c.update(dict(zip(keys, counts)))  # an empty Counter takes a dict in one C call
        return c
    get = c.get
    for k, n in zip(keys, counts):
        c[k] = get(k, 0) + n
    return c
