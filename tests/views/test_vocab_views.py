"""analysis.views.vocab_views: the vocabulary search/filter of Load & inspect, token search of Merge trees, the STT table
of Token health."""

from __future__ import annotations

import pandas as pd
import pytest
from support import load_shared

from analysis import LoadedTokenizer
from analysis.tokenizer.vocab_table import vocab_table
from analysis.views.vocab_views import (
    VOCAB_SORTS,
    filter_stt,
    filter_vocab,
    page_count,
    search_tokens,
    sort_vocab,
    stt_table,
    vocab_page,
    would_be_ranks,
)


def _toy() -> LoadedTokenizer:
    """ "cab" needs ca+b, but a+b (rank 0) fires first: unreachable, BPE builds c | ab."""
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "ca": 6, "cab": 7}
    merges = [["a", "b"], ["b", "c"], ["ab", "c"], ["c", "a"], ["ca", "b"]]
    doc = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
           "model": {"type": "BPE", "vocab": vocab, "merges": merges}}  # fmt: skip
    return LoadedTokenizer.from_document(doc, name="toy")


def test_filter_vocab_regex_literal_fallback_scripts_and_specials():
    df = vocab_table(load_shared("llama-2"))
    bytes_4x = filter_vocab(df, "^<0x4")
    assert len(bytes_4x) == 16 and bytes_4x["token"].str.startswith("<0x4").all()
    # "(" is not a valid regular expression: searched literally instead of failing
    paren = filter_vocab(df, "(")
    assert (
        len(paren) > 0
        and (
            paren["readable"].str.contains("(", regex=False) | paren["token"].str.contains("(", regex=False)
        ).all()
    )
    cyrl = filter_vocab(df, scripts=["Cyrillic"])
    assert len(cyrl) > 100 and set(cyrl["script"]) == {"Cyrillic"}
    assert set(filter_vocab(df, special_only=True)["id"]) == {0, 1, 2}
    assert len(vocab_table(load_shared("llama-2"))) == 32000  # the cached table is untouched


@pytest.mark.slow
def test_vocab_pages_cover_the_view_once_in_every_order():
    df = vocab_table(load_shared("llama-2"))
    assert page_count(0) == 1 and page_count(1000) == 1 and page_count(1001) == 2
    with pytest.raises(ValueError):
        page_count(5, 0)
    for order, (column, ascending) in VOCAB_SORTS.items():
        view = sort_vocab(df, order)
        pages = [vocab_page(view, k, 7_000)[0] for k in range(1, page_count(len(view), 7_000) + 1)]
        assert [len(p) for p in pages] == [7_000] * 4 + [4_000]
        joined = pd.concat(pages)
        assert sorted(joined["id"]) == list(range(32_000))  # every token once
        keys = list(joined[column])
        assert keys == sorted(keys, reverse=not ascending)
        if column != "id":  # ties keep id order
            for _, group in joined.groupby(column, sort=False):
                assert list(group["id"]) == sorted(group["id"])
    longest = sort_vocab(df, "bytes, longest first").iloc[0]
    assert longest["bytes"] == df["bytes"].max()
    # a page past the end is the last page; page 0 is the first
    assert vocab_page(df, 99, 10_000)[0]["id"].tolist() == list(range(30_000, 32_000))
    assert vocab_page(df, 0, 10_000)[0]["id"].iloc[0] == 0
    with pytest.raises(ValueError, match="unknown order"):
        sort_vocab(df, "length")
    assert list(vocab_table(load_shared("llama-2"))["id"]) == list(
        range(32_000)
    )  # the cached table is untouched


def test_search_tokens_ids_exact_first_and_substrings():
    tok = load_shared("gpt2")
    assert search_tokens(tok, "#464") == [464]
    hits = search_tokens(tok, "ing", limit=50)
    assert hits[0] == tok.vocab["ing"] and len(hits) == 50
    assert all("ing" in tok.readable(tok.id_to_token[i]).lower() or "ing" in tok.id_to_token[i] for i in hits)
    assert search_tokens(tok, "") == [] and search_tokens(tok, "no-such-token-anywhere") == []


def test_stt_table_filter_and_would_be_ranks():
    tok = _toy()
    df = stt_table(tok)
    row = df.set_index("readable").loc["cab"]
    assert row["category"] == "unreachable_multi" and row["pieces"] == "c | ab"
    df["category"] = "changed"  # a caller's copy: the cached table stays as it was
    assert set(stt_table(tok)["category"]) != {"changed"}
    view = filter_stt(stt_table(tok), ["reachable"], query="A")  # case-insensitive on the readable form
    assert set(view["readable"]) == {"a", "ab", "ca", "abc"}
    assert would_be_ranks(tok, [7, 3, 0]) == {7: 4, 3: 0, 0: None}
