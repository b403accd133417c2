"""Round-trip categories: does decoding a token and encoding the text again give the token back?

The round trip of Land & Bartolo, "Fishing for Magikarp: Automatically Detecting Under-trained Tokens in Large
Language Models" (EMNLP 2024), §2.2: ``decode([id])``, then encode without special tokens; a token whose
round trip gives it back is OK, otherwise the text tells why (a special token, a partial UTF-8 character, or
another tokenization).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenizers import Tokenizer, decoders

from analysis.core.cache import memoize
from analysis.tokenizer.alphabets import SPIECE_UNDERLINE
from analysis.tokenizer.tokenizer import LoadedTokenizer

OK = "OK"
OK_SPECIAL = "OK_SPECIAL"
UNREACHABLE_SPECIAL = "UNREACHABLE_SPECIAL"
UNDECODEABLE = "UNDECODEABLE"
UNREACHABLE_SINGLE = "UNREACHABLE_SINGLE_TOKEN"
UNREACHABLE_MULTI = "UNREACHABLE_MULTI_TOKEN"
PADDING_ROW = "PADDING_ROW"  # embedding row beyond the tokenizer
MISSING = "MISSING"  # an id inside the tokenizer range that names no token
ROUND_TRIP_CATEGORIES = (
    OK,
    OK_SPECIAL,
    UNREACHABLE_SPECIAL,
    UNDECODEABLE,
    UNREACHABLE_SINGLE,
    UNREACHABLE_MULTI,
    PADDING_ROW,
    MISSING,
)


def decode_tokenizer(tok: LoadedTokenizer) -> Tokenizer:
    """A private fast tokenizer whose decoder does no clean-up of spaces."""
    tk = tok.fresh_tokenizer()
    dec = tok.decoder or {}
    if dec.get("type") == "WordPiece" and dec.get("cleanup", True):
        tk.decoder = decoders.WordPiece(prefix=dec.get("prefix", "##"), cleanup=False)
    return tk


@dataclass
class RoundTrip:
    """Per-id round-trip results: category, decoded string and re-encoded ids."""

    categories: list[str]
    decoded: list[str]
    reencoded: list[list[int]]
    prefix_mode: bool


def special_ids(tok: LoadedTokenizer) -> set[int]:
    """Ids of special tokens (added tokens marked special, plus the unk token)."""
    ids = {a.id for a in tok.special_tokens}
    if tok.unk_token is not None and tok.unk_token in tok.vocab:
        ids.add(tok.vocab[tok.unk_token])
    return ids


@memoize(maxsize=4)
def round_trip_categories(tok: LoadedTokenizer) -> RoundTrip:
    """magikarp's round trip for every id < vocab_size: decode([id]) then encode without specials (§2.2).

    Kept per tokenizer content for the process (the analysis and the verifier of one run, a second session on the
    same model): the result is shared, read-only."""
    tk = decode_tokenizer(tok)
    n = tok.vocab_size
    id_to_tok = tok.id_to_token
    ids = [i for i in range(n) if i in id_to_tok]
    # leading-space handling: tokenizers that add a prefix space get a «/» prefix token first
    first = tk.encode("test", add_special_tokens=False).tokens
    prefix_mode = bool(first) and first[0][:1] in (" ", SPIECE_UNDERLINE, "_", "Ġ")
    pid = None
    if prefix_mode:
        for ch in ("«", "»"):
            e = tk.encode(ch, add_special_tokens=False).ids
            if len(e) == 1:
                pid = e[0]
                break
        if pid is None:
            prefix_mode = False
    if prefix_mode:
        dec = tk.decode_batch([[pid, i] for i in ids], skip_special_tokens=False)
        pre = tk.decode([pid], skip_special_tokens=False)
        dec = [d[len(pre) :] if d.startswith(pre) else d[1:] for d in dec]
        lead = tk.decode([pid])  # once, not once per id
        enc = tk.encode_batch_fast([lead + d for d in dec], add_special_tokens=False)
        reenc = [e.ids[1:] if e.ids[:1] == [pid] else e.ids for e in enc]
    else:
        dec = tk.decode_batch([[i] for i in ids], skip_special_tokens=False)
        reenc = [e.ids for e in tk.encode_batch_fast(dec, add_special_tokens=False)]
    specials = special_ids(tok)
    cats = [MISSING] * n
    decoded = [""] * n
    reencoded: list[list[int]] = [[] for _ in range(n)]
    for i, s, r in zip(ids, dec, reenc):
        decoded[i] = s
        reencoded[i] = r
        if r == [i]:
            cats[i] = OK_SPECIAL if i in specials else OK
        elif len(s) >= 3 and s[0] in "[<" and s[-1] in "]>" and any(c.isalpha() for c in s):
            cats[i] = UNREACHABLE_SPECIAL
        elif "\ufffd" in s:
            cats[i] = UNDECODEABLE
        elif len(r) == 1:
            cats[i] = UNREACHABLE_SINGLE
        else:
            cats[i] = UNREACHABLE_MULTI
    return RoundTrip(cats, decoded, reencoded, prefix_mode)
