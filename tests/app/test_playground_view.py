"""The Playground's views: the id sequence of every tokenizer (copyable), the compact diff of token boundaries,
and a shared link that opens without Streamlit's "default value but also set via the Session State API" warning."""

from __future__ import annotations

import html
import logging
import re

import pytest
from streamlit.elements.lib import policies
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared, static_tables

from analysis.views.playground import boundary_diff, compare_encodings
from ui.spans import token_spans_html

TEXT = "Tokenization is unbelievably fun, tere hommikust!"


def test_boundary_diff_lists_only_the_stretches_where_tokenizers_disagree():
    toks = [load_shared("gpt2"), load_shared("llama-3.1")]
    views = compare_encodings(toks, TEXT)
    diff = boundary_diff(TEXT, views)
    assert diff, "GPT-2 and Llama-3.1 split this text differently somewhere"
    for d in diff:
        assert d.text == TEXT[d.start : d.end]
        for pieces in d.pieces:
            assert "".join(pieces) == d.text  # each tokenizer's pieces cover the stretch exactly
        assert len({tuple(p) for p in d.pieces}) > 1  # and they differ
    # stretches where both agree are left out; together with them the diff tiles the text
    cuts = sorted(set.intersection(*(v.boundaries for v in views)) | {0, len(TEXT)})
    agreed = [(a, b) for a, b in zip(cuts, cuts[1:]) if (a, b) not in {(d.start, d.end) for d in diff}]
    assert agreed and all(TEXT[a:b] for a, b in agreed)


def test_boundary_diff_of_one_tokenizer_or_identical_ones_is_empty():
    gpt2 = load_shared("gpt2")
    assert boundary_diff(TEXT, compare_encodings([gpt2], TEXT)) == []
    assert boundary_diff(TEXT, compare_encodings([gpt2, gpt2], TEXT)) == []


def _open_link(**query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page("pages/playground.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_ids_of_every_tokenizer_are_shown_as_copyable_text():
    at = _open_link(t=["example:gpt2", "example:llama-3.1"], text=TEXT)
    codes = [c.value for c in at.code]
    for name in ("gpt2", "llama-3.1"):
        ids = load_shared(name).tokenizer.encode(TEXT, add_special_tokens=False).ids
        assert " ".join(map(str, ids)) in codes, (name, codes)


def test_boundary_diff_table_on_the_page():
    at = _open_link(t=["example:gpt2", "example:llama-3.1"], text=TEXT)
    assert not at.dataframe, "the first view is static: no grid module to load"
    diff = next(d for d in static_tables(at) if "text" in d.columns and "gpt2" in d.columns)
    views = compare_encodings([load_shared("gpt2"), load_shared("llama-3.1")], TEXT)
    assert len(diff) == len(boundary_diff(TEXT, views)) > 0


def test_shared_link_logs_no_session_state_warning(monkeypatch, caplog):
    """A link sets the text through the Session State API: the widget must not also get a default value."""
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    with caplog.at_level(logging.WARNING):
        at = _open_link(t=["example:gpt2"], text="Hello from a link", spaces="1")
    assert at.text_area(key="pg-text").value == "Hello from a link"
    assert not [r for r in caplog.records if "Session State API" in r.getMessage()]


@pytest.mark.parametrize(
    ("name", "text", "drawn"),
    [("gpt2", "Hello Привет", "Hello ⟨D0⟩⟨9F⟩ривет"), ("gpt2", "Привет, мир!", "⟨D0⟩⟨9F⟩ривет, ⟨D0⟩⟨BC⟩ир!"),
     ("qwen3", " 東京", " ⟨E6 9D⟩⟨B1⟩京")],
)  # fmt: skip
def test_each_token_shows_its_own_bytes_where_byte_level_tokens_split_a_character(name, text, drawn):
    """Byte-level tokens that share a character get that character's offsets, also when one of them goes on into
    the next character (gpt2's " П" then "П"): each shows its own bytes, so no character is drawn twice (the page
    drew "Hello ППривет" and " 東東京")."""
    tok = load_shared(name)
    enc = tok.tokenizer.encode(text)
    spans = re.findall(r'">([^<]*)</span>', token_spans_html(tok, text, enc.ids, enc.offsets))
    assert len(spans) == len(enc.ids) and "".join(html.unescape(s) for s in spans) == drawn
