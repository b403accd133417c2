"""Filtered views of a vocabulary, as the pages show them: the vocabulary table narrowed by a search, token
search by text or id (Merge trees), and the Self-Tokenization Test as one row per id (Token health).

The tables underneath are cached by content hash (`vocab_table`, `bpe.stt_report`); the functions here
return new frames and never modify a cached one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import pandas as pd

from analysis.bpe import merge_candidates_for, stt_report
from analysis.core.cache import memoize
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: the STT categories a token can never be produced in (by merges)
UNREACHABLE = ("unreachable_multi", "unreachable_other_single", "merge_skip_only")


def filter_vocab(
    table: pd.DataFrame, query: str = "", scripts: Iterable[str] = (), special_only: bool = False
) -> pd.DataFrame:
    """Rows of a `vocab_table` whose readable or raw form matches `query` (a regex; an invalid one is searched
    literally), in one of `scripts` (all when empty), and only added/special tokens with `special_only`."""
    view = table
    if query:
        try:
            mask = view["readable"].str.contains(query, regex=True, na=False) | view["token"].str.contains(
                query, regex=True, na=False
            )
        except (re.error, ValueError):  # not a valid regular expression: a literal search
            mask = view["readable"].str.contains(query, regex=False, na=False) | view["token"].str.contains(
                query, regex=False, na=False
            )
        view = view[mask]
    scripts = list(scripts)
    if scripts:
        view = view[view["script"].isin(scripts)]
    if special_only:
        view = view[view["added"] | view["special"]]
    return view


#: rows of the vocabulary table the page sends to the browser at once: a 150k-row table is 7 MB of Arrow that
#: the browser parses and lays out before the page is idle (about 2 s); search, filters and sorting act on all rows
VOCAB_PAGE_ROWS = 1_000

#: the vocabulary table's orders: label → (column, ascending)
VOCAB_SORTS: dict[str, tuple[str, bool]] = {
    "id": ("id", True),
    "bytes, longest first": ("bytes", False),
    "characters, longest first": ("length", False),
    "readable form, A→Z": ("readable", True),
}


def sort_vocab(view: pd.DataFrame, order: str) -> pd.DataFrame:
    """`view` in one of the :data:`VOCAB_SORTS` orders (ties by id; a stable sort, so equal keys keep id order)."""
    if order not in VOCAB_SORTS:
        raise ValueError(f"unknown order {order!r}; one of {', '.join(VOCAB_SORTS)}")
    column, ascending = VOCAB_SORTS[order]
    by_id = view if view["id"].is_monotonic_increasing else view.sort_values("id", kind="stable")
    return by_id if column == "id" else by_id.sort_values(column, ascending=ascending, kind="stable")


def page_count(n_rows: int, rows: int = VOCAB_PAGE_ROWS) -> int:
    """Pages of `rows` rows that `n_rows` rows fill (at least 1: an empty view has one empty page)."""
    if rows < 1:
        raise ValueError("rows must be at least 1")
    return max(1, -(-n_rows // rows))


def vocab_page(view: pd.DataFrame, page: int, rows: int = VOCAB_PAGE_ROWS) -> tuple[pd.DataFrame, int]:
    """Page `page` (1-based, clamped to the pages there are) of `view`, `rows` rows a page, and the number of
    pages (at least 1, so an empty view has one empty page)."""
    n_pages = page_count(len(view), rows)
    page = min(max(1, int(page)), n_pages)
    return view.iloc[(page - 1) * rows : page * rows], n_pages


@memoize(maxsize=4)
def _readables(tok: LoadedTokenizer) -> list[tuple[int, str, str]]:
    """(id, raw, readable) for the model vocabulary, sorted by id."""
    return sorted((i, s, tok.readable(s)) for s, i in tok.vocab.items())


def search_tokens(tok: LoadedTokenizer, q: str, limit: int = 200) -> list[int]:
    """Ids whose raw or readable form contains `q`: exact matches first, then shorter first; `#123` is an id."""
    q = q.strip("\n")
    if not q:
        return []
    m = re.fullmatch(r"#(\d+)", q.strip())
    if m and int(m.group(1)) in tok.id_to_token:
        return [int(m.group(1))]
    exact = [tok.vocab[q]] if q in tok.vocab else []
    ql = q.lower()
    hits: list[tuple[int, int, int]] = []
    for i, raw, readable in _readables(tok):
        if readable == q or raw == q:
            hits.append((0, len(readable), i))
        elif ql in readable.lower() or q in raw:
            hits.append((1, len(readable), i))
    hits.sort()
    return (exact + [i for _, _, i in hits if i not in exact])[:limit]


@memoize(maxsize=4)
def _stt_table(tok: LoadedTokenizer) -> pd.DataFrame:
    rep = stt_report(tok)
    id_to_token = tok.id_to_token
    return pd.DataFrame(
        {
            "id": [r.id for r in rep.rows],
            "readable": [r.readable for r in rep.rows],
            "token": [r.token for r in rep.rows],
            "category": [r.category for r in rep.rows],
            "script": [r.script for r in rep.rows],
            "pieces": [
                ""
                if r.category in ("reachable", "special")
                else " | ".join(tok.readable(id_to_token.get(p, "?")) for p in r.pieces)
                for r in rep.rows
            ],
        }
    )


def stt_table(tok: LoadedTokenizer) -> pd.DataFrame:
    """The STT as one row per id: id, readable, token, category, script and, for a token that is not reachable,
    the pieces BPE builds instead (cached per tokenizer; BPE only)."""
    return _stt_table(tok).copy(deep=False)


def filter_stt(
    table: pd.DataFrame, categories: Iterable[str], query: str = "", scripts: Iterable[str] = ()
) -> pd.DataFrame:
    """Rows of an `stt_table` in `categories`, matching `query` (readable case-insensitively, or raw) and in one
    of `scripts` (all when empty)."""
    view = table[table["category"].isin(list(categories))]
    if query:
        view = view[
            view["readable"].str.contains(query, case=False, regex=False)
            | view["token"].str.contains(query, regex=False)
        ]
    scripts = list(scripts)
    if scripts:
        view = view[view["script"].isin(scripts)]
    return view


def would_be_ranks(tok: LoadedTokenizer, ids: Sequence[int]) -> dict[int, int | None]:
    """Rank of the lowest merge that would produce each token (None when no merge produces it)."""
    out: dict[int, int | None] = {}
    for i in ids:
        c = merge_candidates_for(tok, tok.id_to_token[i])
        out[i] = c[0][0] if c else None
    return out
