"""The vocabulary as a table: one row per id (model vocabulary and added tokens), built once per tokenizer.

Columns: `id`, `token` (raw vocabulary string), `readable` (the text it stands for, partial UTF-8 shown as
`⟨E2 80⟩`), `bytes` (length in bytes), `length` (characters of `readable`), `script`, `special`, `added`.
Tables are cached by the tokenizer's content hash, so the Inspect page pays the build cost once.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pandas.arrays import ArrowStringArray

from analysis.core.cache import memoize
from analysis.core.unicode import deciding_script, text_script

from .alphabets import BYTE_LEVEL_TABLE, CHAR_TO_BYTE, SPIECE_UNDERLINE, readable_from_bytes
from .tokenizer import LoadedTokenizer

#: The script label of tokens that are only partial UTF-8 (byte fragments such as `⟨E2 80⟩`).
BYTES_SCRIPT = "Bytes"
#: The script label of special added tokens (`<s>`, `<|endoftext|>`, `[CLS]`).
SPECIAL_SCRIPT = "Special"
COLUMNS = ["id", "token", "readable", "bytes", "length", "script", "special", "added"]


def vocab_table(tok: LoadedTokenizer) -> pd.DataFrame:
    """One row per token id with columns id, token, readable, bytes, length, script, special, added."""
    return _table(tok).copy(deep=False)  # copy-on-write: callers may edit their copy freely


@memoize(maxsize=8)
def _table(tok: LoadedTokenizer) -> pd.DataFrame:
    return _build(tok)


def clear_cache() -> None:
    """Forget every cached table (tests and benchmarks use this to time a cold build)."""
    _table.cache_clear()


def _rows(tok: LoadedTokenizer) -> tuple[np.ndarray, list[str], set[int], set[int]]:
    """Sorted ids, their raw tokens, the added ids and the special ids."""
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
    return ids, tokens, set(added), {i for i, a in added.items() if a.special}


def _frame(ids, tokens, readable, nbytes, scripts, is_special, is_added) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": ids,
            "token": _strings(tokens),
            "readable": _strings(readable),
            "bytes": np.asarray(nbytes, dtype=np.int32),
            "length": _lengths(readable),
            "script": pd.Categorical(scripts),
            "special": np.asarray(is_special, dtype=bool),
            "added": np.asarray(is_added, dtype=bool),
        },
        columns=COLUMNS,
    )


def _strings(values) -> pd.api.extensions.ExtensionArray:
    """A pandas string column from a list or (zero-copy) from a pyarrow string array."""
    if isinstance(values, pa.Array):
        return ArrowStringArray(pa.chunked_array([values]))
    return pd.array(values, dtype="string")


def _lengths(values) -> np.ndarray:
    """Characters per string."""
    if isinstance(values, pa.Array):
        return pc.utf8_length(values).to_numpy(zero_copy_only=False).astype(np.int32)
    return np.fromiter(map(len, values), dtype=np.int32, count=len(values))


_SURROGATE = re.compile("[\udc80-\udcff]")
#: the first letter-like character (Unicode L or M) of a string, for the script column
_FIRST_LETTER = r"(?P<c>[\p{L}\p{M}])"


def _build(tok: LoadedTokenizer) -> pd.DataFrame:
    """Vectorised build: whole-column string kernels (pyarrow) and C-level list passes, no per-row logic
    except for the few rows that need it (byte pieces, partial UTF-8, added tokens)."""
    try:
        return _build_vectorised(tok)
    except (pa.ArrowException, UnicodeError, ValueError):  # e.g. lone surrogates in a vocabulary
        return _build_loop(tok)


def _build_vectorised(tok: LoadedTokenizer) -> pd.DataFrame:
    ids, tokens, added_ids, special_ids = _rows(tok)
    n = len(tokens)
    added_pos = np.searchsorted(ids, sorted(added_ids)).astype(np.int64).tolist()
    is_added = np.zeros(n, dtype=bool)
    is_added[added_pos] = True
    is_special = np.zeros(n, dtype=bool)
    is_special[np.searchsorted(ids, sorted(special_ids)).astype(np.int64)] = True
    raw = pa.array(tokens, pa.string())
    fragment = np.zeros(n, dtype=bool)  # rows whose bytes are not valid UTF-8
    byte_rows: list[int] = []  # rows whose bytes go through the exact per-token rule

    if tok.is_byte_level:
        outside = pc.match_substring_regex(raw, "[^" + re.escape("".join(CHAR_TO_BYTE)) + "]")
        byte_rows = np.flatnonzero(outside.to_numpy(zero_copy_only=False)).tolist()
        latin = [t.translate(BYTE_LEVEL_TABLE) for t in tokens]
        for k in byte_rows:  # not byte-level text (added tokens): kept as its own characters
            latin[k] = ""
        bs = [s.encode("latin-1") for s in latin]
        dec = [b.decode("utf-8", "surrogateescape") for b in bs]
        bad = [k for k, d in enumerate(dec) if _SURROGATE.search(d)]
        readable = dec
        nbytes = np.fromiter(map(len, bs), dtype=np.int32, count=n)
        for k in bad:
            readable[k] = readable_from_bytes(bs[k])
            fragment[k] = True
    else:
        arr = raw
        cand = pc.and_(
            pc.and_(pc.starts_with(arr, "<0x"), pc.ends_with(arr, ">")), pc.equal(pc.utf8_length(arr), 6)
        )
        byte_rows = np.flatnonzero(cand.to_numpy(zero_copy_only=False)).tolist()
        if tok.is_sentencepiece_style:
            arr = pc.replace_substring(arr, SPIECE_UNDERLINE, " ")
        prefix = tok.continuing_subword_prefix or ""
        if prefix:
            m = pc.and_(pc.starts_with(arr, prefix), pc.greater(pc.utf8_length(arr), len(prefix)))
            arr = pc.if_else(m, pc.utf8_slice_codeunits(arr, len(prefix)), arr)
        suffix = tok.end_of_word_suffix or ""
        if suffix:
            m = pc.and_(pc.ends_with(arr, suffix), pc.greater(pc.utf8_length(arr), len(suffix)))
            arr = pc.if_else(m, pc.utf8_slice_codeunits(arr, 0, -len(suffix)), arr)
        readable = arr.to_pylist()
        nbytes = pc.binary_length(arr).to_numpy(zero_copy_only=False).astype(np.int32)
        to_bytes = _token_bytes_function(tok)
        for k in byte_rows:
            b = to_bytes(tokens[k])
            nbytes[k] = len(b)
            try:
                readable[k] = b.decode("utf-8")
            except UnicodeDecodeError:
                readable[k] = readable_from_bytes(b)
                fragment[k] = True
    if tok.is_byte_level:
        to_bytes = _token_bytes_function(tok)
        for k in byte_rows:
            if not is_added[k]:
                b = to_bytes(tokens[k])
                nbytes[k] = len(b)
                readable[k] = readable_from_bytes(b)
                fragment[k] = "⟨" in readable[k] and "⟨" not in tokens[k]
    for k in added_pos:
        t = tokens[k]
        readable[k] = t
        nbytes[k] = len(t.encode("utf-8"))
        fragment[k] = False

    # script: the first letter-like character decides (one lookup per distinct character); the rows
    # without one, or whose first one does not decide, go through text_script
    readable_arr = pa.array(readable, pa.string())
    first = pc.extract_regex(readable_arr, _FIRST_LETTER).field("c").dictionary_encode()
    per_char = np.array(
        [(deciding_script(c) if c else None) for c in first.dictionary.to_pylist()], dtype=object
    )
    codes = first.indices.to_numpy(zero_copy_only=False)
    scripts = per_char[codes]
    for k in np.flatnonzero(pd.isna(scripts)).tolist():
        scripts[k] = text_script(readable[k])
    for k in np.flatnonzero(fragment).tolist():
        whole = to_bytes(tokens[k]).decode("utf-8", errors="ignore")
        scripts[k] = text_script(whole) if whole.strip() else BYTES_SCRIPT
    for k in added_pos:
        scripts[k] = SPECIAL_SCRIPT if is_special[k] else text_script(tokens[k])
    return _frame(ids, raw, readable_arr, nbytes, scripts, is_special, is_added)


def _build_loop(tok: LoadedTokenizer) -> pd.DataFrame:
    """Reference implementation: one token at a time (used as a fallback and to check `_build`)."""
    ids, tokens, added_ids, special_ids = _rows(tok)

    to_bytes = _token_bytes_function(tok)
    readable: list[str] = []
    nbytes: list[int] = []
    scripts: list[str] = []
    for i, t in zip(ids.tolist(), tokens):
        if i in added_ids:
            r = t
            b = len(t.encode("utf-8"))
            sc = SPECIAL_SCRIPT if i in special_ids else text_script(t)
        else:
            bs = to_bytes(t)
            b = len(bs)
            try:
                r = bs.decode("utf-8")
                sc = text_script(r)
            except UnicodeDecodeError:  # a partial UTF-8 fragment: script of its whole characters
                r = readable_from_bytes(bs)
                whole = bs.decode("utf-8", errors="ignore")
                sc = text_script(whole) if whole.strip() else BYTES_SCRIPT
        readable.append(r)
        nbytes.append(b)
        scripts.append(sc)
    is_added = np.fromiter((i in added_ids for i in ids.tolist()), dtype=bool, count=len(ids))
    is_special = np.fromiter((i in special_ids for i in ids.tolist()), dtype=bool, count=len(ids))
    return _frame(ids, tokens, readable, np.asarray(nbytes, dtype=np.int32), scripts, is_special, is_added)


def script_counts(tok: LoadedTokenizer) -> pd.Series:
    """Number of vocabulary entries per script (largest first), from the cached table."""
    return vocab_table(tok)["script"].value_counts()


def _token_bytes_function(tok: LoadedTokenizer):
    """A fast equivalent of `tok.token_bytes` with the tokenizer's flags looked up once."""
    if tok.is_byte_level:  # already one C-level translate per token
        return tok.token_bytes
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
