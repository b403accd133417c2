"""The vocabulary as a table: one row per id (model vocabulary and added tokens), built once per tokenizer.

Columns: `id`, `token` (raw vocabulary string), `readable` (the text it stands for, partial UTF-8 shown as
`⟨E2 80⟩`), `bytes` (length in bytes), `length` (characters of `readable`), `script`, `special`, `added`.
Tables are cached by the tokenizer's content hash, so the Inspect page pays the build cost once.
"""

from __future__ import annotations

from collections import OrderedDict
from threading import Lock

import numpy as np
import pandas as pd

from .tokenizer import CHAR_TO_BYTE, SPIECE_UNDERLINE, LoadedTokenizer, readable_from_bytes, script_of

#: The script label of tokens that are only partial UTF-8 (byte fragments such as `⟨E2 80⟩`).
BYTES_SCRIPT = "Bytes"
#: The script label of special added tokens (`<s>`, `<|endoftext|>`, `[CLS]`).
SPECIAL_SCRIPT = "Special"
COLUMNS = ["id", "token", "readable", "bytes", "length", "script", "special", "added"]

_CACHE: OrderedDict[str, pd.DataFrame] = OrderedDict()
_CACHE_SIZE = 8
_LOCK = Lock()

# byte-level characters → the byte they stand for, as a latin-1 character (str.translate works in C)
_BYTE_LEVEL_TABLE = str.maketrans({c: chr(b) for c, b in CHAR_TO_BYTE.items()})
_BYTE_LEVEL_ALPHABET = frozenset(CHAR_TO_BYTE)


def vocab_table(tok: LoadedTokenizer) -> pd.DataFrame:
    """One row per token id with columns id, token, readable, bytes, length, script, special, added."""
    key = tok.content_hash
    with _LOCK:
        df = _CACHE.get(key)
        if df is not None:
            _CACHE.move_to_end(key)
    if df is None:
        df = _build(tok)
        with _LOCK:
            _CACHE[key] = df
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return df.copy(deep=False)  # copy-on-write: callers may edit their copy freely


def clear_cache() -> None:
    """Forget every cached table (tests and benchmarks use this to time a cold build)."""
    with _LOCK:
        _CACHE.clear()


def _build(tok: LoadedTokenizer) -> pd.DataFrame:
    rust = tok.tokenizer
    mv = tok.model.get("vocab")  # read from the parsed document: faster than Rust's get_vocab()
    if isinstance(mv, list):  # Unigram: [piece, score] pairs, id = position
        id_tok: dict[int, str] = {i: p[0] for i, p in enumerate(mv)}
    elif isinstance(mv, dict):
        id_tok = {i: t for t, i in mv.items()}
    else:
        id_tok = {i: t for t, i in rust.get_vocab(with_added_tokens=False).items()}
    added = rust.get_added_tokens_decoder()  # id -> tokenizers.AddedToken, ids as resolved by Rust
    for i, a in added.items():
        id_tok[i] = a.content
    ids = np.fromiter(sorted(id_tok), dtype=np.int64, count=len(id_tok))
    tokens = [id_tok[i] for i in ids.tolist()]
    added_ids = set(added)
    special_ids = {i for i, a in added.items() if a.special}

    to_bytes = _token_bytes_function(tok)
    readable: list[str] = []
    nbytes: list[int] = []
    scripts: list[str] = []
    for i, t in zip(ids.tolist(), tokens):
        if i in added_ids:
            r = t
            b = len(t.encode("utf-8"))
            sc = SPECIAL_SCRIPT if i in special_ids else script_of(t)
        else:
            bs = to_bytes(t)
            b = len(bs)
            try:
                r = bs.decode("utf-8")
                sc = script_of(r)
            except UnicodeDecodeError:  # a partial UTF-8 fragment: script of its whole characters
                r = readable_from_bytes(bs)
                whole = bs.decode("utf-8", errors="ignore")
                sc = script_of(whole) if whole.strip() else BYTES_SCRIPT
        readable.append(r)
        nbytes.append(b)
        scripts.append(sc)
    is_added = np.fromiter((i in added_ids for i in ids.tolist()), dtype=bool, count=len(ids))
    is_special = np.fromiter((i in special_ids for i in ids.tolist()), dtype=bool, count=len(ids))
    df = pd.DataFrame(
        {
            "id": ids,
            "token": pd.array(tokens, dtype="string"),
            "readable": pd.array(readable, dtype="string"),
            "bytes": np.asarray(nbytes, dtype=np.int32),
            "length": np.fromiter(map(len, readable), dtype=np.int32, count=len(readable)),
            "script": pd.Categorical(scripts),
            "special": is_special,
            "added": is_added,
        },
        columns=COLUMNS,
    )
    return df


def script_counts(tok: LoadedTokenizer) -> pd.Series:
    """Number of vocabulary entries per script (largest first), from the cached table."""
    return vocab_table(tok)["script"].value_counts()


def _token_bytes_function(tok: LoadedTokenizer):
    """A fast equivalent of `tok.token_bytes` with the tokenizer's flags looked up once."""
    if tok.is_byte_level:

        def byte_level(t: str) -> bytes:
            if _BYTE_LEVEL_ALPHABET.issuperset(t):
                return t.translate(_BYTE_LEVEL_TABLE).encode("latin-1")
            return t.encode("utf-8")

        return byte_level
    sp = tok.is_sentencepiece_style
    prefix = tok.continuing_subword_prefix or ""
    suffix = tok.end_of_word_suffix or ""

    def other(t: str) -> bytes:
        if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            try:
                return bytes([int(t[3:5], 16)])
            except ValueError:
                pass
        if sp:
            t = t.replace(SPIECE_UNDERLINE, " ")
        if prefix and t.startswith(prefix) and len(t) > len(prefix):
            t = t[len(prefix) :]
        if suffix and t.endswith(suffix) and len(t) > len(suffix):
            t = t[: -len(suffix)]
        return t.encode("utf-8")

    return other
