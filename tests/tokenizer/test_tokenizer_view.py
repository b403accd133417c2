"""The LoadedTokenizer view: inspection facts, merges in both serialisations, readable token forms, and the
vocabulary table of analysis.tokenizer.vocab_table."""

from __future__ import annotations

import json
import re
import sys
import threading
import time

import pytest
from support import ALL_TOKENIZERS, ASSETS, BPE_TOKENIZERS, flores_lines, load_shared

import analysis.tokenizer.vocab_table as vocab_table_module
from analysis import LoadedTokenizer, TokenizerLoadError
from analysis.core.unicode import text_script as script_of
from analysis.tokenizer import shared as shared_views
from analysis.tokenizer import tokenizer as view
from analysis.tokenizer.alphabets import format_bytes, readable_from_bytes
from analysis.tokenizer.document import parse_merges
from analysis.tokenizer.vocab_table import (
    BYTES_SCRIPT,
    COLUMNS,
    SPECIAL_SCRIPT,
    _build_loop,
    _build_vectorised,
    clear_cache,
    vocab_table,
)


# --------------------------------------------------------------------------------------------------
# inspection facts
# --------------------------------------------------------------------------------------------------
def test_issue_facts():
    assert load_shared("llama-3.1").ignore_merges is True
    assert load_shared("llama-2").byte_fallback is True
    assert load_shared("bert-base-uncased").model_type == "WordPiece"
    assert load_shared("pegasus-unigram").model_type == "Unigram"
    assert load_shared("gpt2").model_type == "BPE" and load_shared("gpt2").ignore_merges is False


@pytest.mark.parametrize(
    "name,model_type,flavour,vocab_size,model_vocab,n_added",
    [
        ("gpt2", "BPE", "byte-level", 50257, 50257, 1),
        ("llama-3.1", "BPE", "byte-level", 128256, 128000, 256),
        ("llama-2", "BPE", "sentencepiece", 32000, 32000, 3),
        ("bert-base-uncased", "WordPiece", "wordpiece", 30522, 30522, 5),
        ("pegasus-unigram", "Unigram", "sentencepiece", 96103, 96103, None),
        ("qwen3", "BPE", "byte-level", 151669, 151643, 26),
        ("gemma", "BPE", "sentencepiece", 256000, 256000, None),
    ],
)
def test_sizes_and_flavour(name, model_type, flavour, vocab_size, model_vocab, n_added):
    tok = load_shared(name)
    assert tok.model_type == model_type
    assert tok.flavour == flavour
    assert tok.vocab_size == vocab_size  # includes added tokens
    assert len(tok.vocab) == model_vocab
    if n_added is not None:
        assert len(tok.added_tokens) == n_added
    assert tok.vocab_size == len(set(tok.vocab.values()) | tok.added_ids)
    assert len(tok.id_to_token) == tok.vocab_size


def test_flags():
    bert = load_shared("bert-base-uncased")
    assert bert.continuing_subword_prefix == "##" and bert.unk_token == "[UNK]" and bert.merges == []
    assert {a.content for a in bert.special_tokens} == {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
    l3 = load_shared("llama-3.1")
    assert l3.dropout is None and not l3.byte_fallback and l3.is_byte_level
    assert min(l3.added_ids) == 128000 and "<|begin_of_text|>" in {a.content for a in l3.special_tokens}
    l2 = load_shared("llama-2")
    assert l2.unk_token == "<unk>" and l2.is_sentencepiece_style and not l2.ignore_merges
    assert "Prepend('▁')" in l2.summary()["normalizer"]
    assert load_shared("pegasus-unigram").merges == []


def test_summary_is_json_ready_and_hash_stable():
    tok = load_shared("gpt2")
    s = tok.summary()
    json.dumps(s)
    assert s["vocab_size"] == 50257 and s["merges"] == 50000 and s["added_tokens"] == 1
    same = LoadedTokenizer.from_json_text(tok.to_json(), name="x")
    assert same.content_hash == tok.content_hash
    other = LoadedTokenizer.from_document(tok.document() | {"truncation": None, "padding": None}, name="y")
    assert other.vocab == tok.vocab


def test_document_is_a_copy_and_view_is_immutable():
    tok = load_shared("gpt2")
    doc = tok.document()
    doc["model"]["vocab"]["zzzz-new"] = 99999
    doc["model"]["merges"].clear()
    assert "zzzz-new" not in tok.model["vocab"] and len(tok.merges) == 50000
    edited = LoadedTokenizer.from_document(doc, name="edited")
    assert edited.content_hash != tok.content_hash and edited.merges == []


# --------------------------------------------------------------------------------------------------
# merges: "a b" strings and ["a", "b"] lists give identical results
# --------------------------------------------------------------------------------------------------
def test_parse_merges_both_forms_and_errors():
    assert parse_merges(["a b", ["c", "d"], ("e", "f g")]) == [("a", "b"), ("c", "d"), ("e", "f g")]
    assert parse_merges(["a b c"]) == [("a", "b c")]  # split on the first space only
    for bad in (["ab"], [["a"]], [["a", "b", "c"]], [3], [["a", 1]]):
        with pytest.raises(TokenizerLoadError, match="merge #0"):
            parse_merges(bad)


@pytest.mark.parametrize(
    "merges, message",
    [
        (
            [["a", "b"], ["ab", "c"]],
            None,
        ),  # the list form's fast path: every merged string is in the vocabulary
        (["a b", "ab c"], None),
        ([["a", "b"], ["b", "c"]], "not in the vocabulary"),  # "bc" is not
        ([["a", "b", "c"]], "merge #0"),  # malformed: named, not a TypeError from the fast path
        ([["a", ["b"]]], "merge #0"),
        ([[1, 2]], "merge #0"),
    ],
)
def test_check_document_merges_in_list_form(merges, message):
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4}
    doc = {"version": "1.0", "added_tokens": [], "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
    if message is None:
        tok = LoadedTokenizer.from_document(doc, name="toy")
        assert tok.tokenizer.encode("abc").tokens == ["abc"]
    else:
        with pytest.raises(TokenizerLoadError, match=message):
            LoadedTokenizer.from_document(doc, name="toy")


def _words(n: int = 40) -> list[str]:
    langs = ["eng_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva", "est_Latn", "jpn_Jpan"]
    return sorted({w for lang in langs for line in flores_lines(lang, n) for w in line.split()})


@pytest.mark.slow
@pytest.mark.parametrize("name,shipped_form", [("gpt2", str), ("qwen3", list)])
def test_merges_in_both_forms_tokenize_identically(name, shipped_form):
    tok = load_shared(name)
    doc = tok.document()
    assert isinstance(doc["model"]["merges"][0], shipped_form)
    if shipped_form is str:
        doc["model"]["merges"] = [list(m.split(" ", 1)) for m in doc["model"]["merges"]]
    else:
        doc["model"]["merges"] = [f"{a} {b}" for a, b in doc["model"]["merges"]]
    other = LoadedTokenizer.from_document(doc, name=f"{name}-other-form")
    assert other.merges == tok.merges
    assert other.content_hash != tok.content_hash  # really a different file
    ma, mb = tok.tokenizer.model, other.tokenizer.model
    # every vocabulary string through the model alone (no pre-processing), and FLORES words
    vocab_strings = list(tok.vocab)[:: 1 if name == "gpt2" else 3]
    pre = tok.tokenizer.pre_tokenizer
    words = [piece for w in _words() for piece, _ in pre.pre_tokenize_str(w)]
    assert len(words) > 2000
    diff = [
        s for s in vocab_strings + words if [t.id for t in ma.tokenize(s)] != [t.id for t in mb.tokenize(s)]
    ]
    assert not diff
    lines = flores_lines("eng_Latn", 30) + flores_lines("zho_Hans", 30)
    assert [e.ids for e in tok.tokenizer.encode_batch(lines)] == [
        e.ids for e in other.tokenizer.encode_batch(lines)
    ]


@pytest.mark.parametrize("name", BPE_TOKENIZERS)
def test_parsed_merges_are_consistent_with_vocab(name):
    tok = load_shared(name)
    v = tok.vocab
    assert tok.merges and all(a in v and b in v and a + b in v for a, b in tok.merges)
    assert len(tok.merges) == len(tok.model["merges"])


# --------------------------------------------------------------------------------------------------
# readable token forms
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,raw,readable",
    [
        ("gpt2", "Ġthe", " the"),
        ("gpt2", "Ċ", "\n"),
        ("gpt2", "ĊĊ", "\n\n"),
        ("gpt2", "âĢ", "⟨E2 80⟩"),  # the first two bytes of a 3-byte character
        ("gpt2", "ĠâĢ", " ⟨E2 80⟩"),
        ("gpt2", "<|endoftext|>", "<|endoftext|>"),
        ("llama-3.1", "ĠÐ¿ÑĢÐµÐ´", " пред"),
        ("llama-3.1", "ĠĠĠ", "   "),
        ("llama-3.1", "<|begin_of_text|>", "<|begin_of_text|>"),
        ("llama-2", "▁the", " the"),
        ("llama-2", "<0x0A>", "\n"),
        ("llama-2", "<0xE2>", "⟨E2⟩"),
        ("llama-2", "▁▁", "  "),
        ("llama-2", "<s>", "<s>"),
        ("gemma", "▁", " "),
        ("gemma", "<0xF0>", "⟨F0⟩"),
        ("gemma", "▁Москва", " Москва"),
        ("bert-base-uncased", "##ing", "ing"),
        ("bert-base-uncased", "[CLS]", "[CLS]"),
        ("bert-base-uncased", "###", "#"),
    ],
)
def test_readable_forms(name, raw, readable):
    tok = load_shared(name)
    assert raw in tok.vocab or raw in {a.content for a in tok.added_tokens}
    assert tok.readable(raw) == readable


def test_byte_pieces():
    l2 = load_shared("llama-2")
    assert l2.is_byte_piece("<0x0A>") and not l2.is_byte_piece("▁the")
    assert l2.token_bytes("<0xE2>") == b"\xe2" and l2.token_bytes("▁the") == b" the"
    assert not load_shared("gpt2").is_byte_piece("<0x0A>")
    assert load_shared("gpt2").token_bytes("ĠâĢ") == b" \xe2\x80"


def test_readable_from_bytes_never_replacement_char():
    assert readable_from_bytes("naïve 東京".encode()) == "naïve 東京"
    assert readable_from_bytes(b"\xe2\x80") == "⟨E2 80⟩"
    assert readable_from_bytes(b"a\xe2\x80b\xff") == "a⟨E2 80⟩b⟨FF⟩"
    assert readable_from_bytes(b"\x80\x80\xe6\x9d\xb1") == "⟨80 80⟩東"
    assert readable_from_bytes(b"\xf0\x9f\x98") == "⟨F0 9F 98⟩"
    assert readable_from_bytes(b"\xed\xa0\x80") == "⟨ED A0 80⟩"  # a UTF-16 surrogate is not UTF-8
    assert format_bytes(b"\x00\xab") == "⟨00 AB⟩"


_FRAGMENT = re.compile(r"⟨((?:[0-9A-F]{2} )*[0-9A-F]{2})⟩")


def _bytes_of_readable(text: str) -> bytes:
    """Invert a readable form: text as UTF-8, ⟨NN …⟩ runs as raw bytes."""
    out, pos = bytearray(), 0
    for m in _FRAGMENT.finditer(text):
        out += text[pos : m.start()].encode()
        out += bytes.fromhex(m.group(1))
        pos = m.end()
    return bytes(out + text[pos:].encode())


@pytest.mark.parametrize("name", ["gpt2", "llama-3.1", "llama-2", "gemma", "bert-base-uncased"])
def test_readable_over_whole_vocab(name):
    """Every token's readable form: no U+FFFD (unless the bytes really are U+FFFD), and it maps back to the
    token's exact bytes."""
    tok = load_shared(name)
    df = vocab_table(tok)
    fragments = 0
    for tid, raw, r, added in zip(df["id"], df["token"], df["readable"], df["added"]):
        if added:
            assert r == raw
            continue
        bs = tok.token_bytes(raw)
        assert "\ufffd" not in r or b"\xef\xbf\xbd" in bs, (tid, raw, r)
        if "⟨" in r and "⟨".encode() not in bs:
            fragments += 1
            assert _bytes_of_readable(r) == bs, (tid, raw, r)
        else:
            assert r.encode() == bs, (tid, raw, r)
    if name in ("gpt2", "llama-3.1", "llama-2", "gemma"):
        assert fragments >= 128  # byte-level partial characters / <0x80>..<0xFF> pieces exist
    else:
        assert fragments == 0


# --------------------------------------------------------------------------------------------------
# vocabulary table
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_vocab_table_columns_and_rows(name):
    tok = load_shared(name)
    df = vocab_table(tok)
    assert list(df.columns) == COLUMNS
    assert len(df) == tok.vocab_size
    assert df["id"].is_unique and df["id"].is_monotonic_increasing
    itt = tok.id_to_token
    assert all(itt[i] == t for i, t in zip(df["id"], df["token"]))
    added = tok.added_ids
    assert set(df.loc[df["added"], "id"]) == set(added)
    assert set(df.loc[df["special"], "id"]) == {a.id for a in tok.special_tokens}
    assert (df.loc[df["special"], "script"] == SPECIAL_SCRIPT).all()
    sample = df.iloc[:: max(1, len(df) // 1500)]
    for t, r, b, n, i in zip(
        sample["token"], sample["readable"], sample["bytes"], sample["length"], sample["id"]
    ):
        assert r == tok.readable(t)
        assert n == len(r)
        assert b == (len(t.encode()) if i in added else len(tok.token_bytes(t)))
    assert (df["bytes"] >= 0).all() and (df["length"] >= 0).all()


def test_vocab_table_scripts_and_bytes():
    df = vocab_table(load_shared("gpt2")).set_index("token")
    assert df.loc["âĢ", "script"] == BYTES_SCRIPT and df.loc["âĢ", "bytes"] == 2
    assert (
        df.loc["Ġthe", "script"] == "Latin" and df.loc["Ġthe", "bytes"] == 4 and df.loc["Ġthe", "length"] == 4
    )
    assert df.loc["<|endoftext|>", "special"] and df.loc["<|endoftext|>", "added"]
    g = vocab_table(load_shared("gemma")).set_index("token")
    assert g.loc["▁Москва", "script"] == "Cyrillic" and g.loc["<0xE2>", "script"] == BYTES_SCRIPT
    counts = vocab_table(load_shared("gemma"))["script"].value_counts()
    assert counts["Latin"] > counts["Han"] > counts["Cyrillic"] > 1000
    assert script_of("東京") == "Han" and script_of("  ") == "Whitespace" and script_of("123") == "Digits"


def test_vocab_table_is_cached_and_copies_are_private(monkeypatch):
    tok = load_shared("llama-3.1")
    clear_cache()
    builds = []
    build = vocab_table_module._build
    monkeypatch.setattr(vocab_table_module, "_build", lambda t: builds.append(t.name) or build(t))
    first = vocab_table(tok)
    second = vocab_table(tok)
    assert builds == [tok.name]  # built once, the second call is served from the cache
    first.loc[0, "readable"] = "MUTATED"
    first = first.drop(columns=["script"])
    assert second.loc[0, "readable"] != "MUTATED" and vocab_table(tok).loc[0, "readable"] != "MUTATED"
    assert list(vocab_table(tok).columns) == COLUMNS
    # a different document (same name) gets its own table
    doc = tok.document()
    doc["added_tokens"] = doc["added_tokens"][:10]
    smaller = LoadedTokenizer.from_document(doc, name=tok.name)
    assert len(vocab_table(smaller)) == 128010


@pytest.mark.parametrize("name", ["gpt2", "llama-2", "bert-base-uncased", "pegasus-unigram", "qwen3"])
def test_vocab_table_vectorised_equals_reference_loop(name):
    """The fast whole-column build gives exactly the table of the one-token-at-a-time reference."""

    tok = load_shared(name)
    fast, ref = _build_vectorised(tok), _build_loop(tok)
    assert fast.equals(ref)


def test_script_labels_of_compatibility_and_marks():
    assert script_of("ｱｲｳ") == "Katakana" and script_of("ＡＢＣ") == "Latin"  # half/fullwidth forms
    assert script_of("𝐀𝐁") == "Latin" and script_of("µ") == "Greek" and script_of("º") == "Latin"
    assert script_of("々") == "Han" and script_of("ー") == "Katakana"
    assert script_of("\u0301a") == "Latin"  # a combining mark does not decide
    assert script_of("ᱚᱞ") == "Ol Chiki" and script_of("ᐊ") == "Canadian Aboriginal"
    assert script_of("—…") == "Punctuation/Symbols" and script_of("") == "Empty"


def test_views_of_the_same_bytes_share_one_rust_tokenizer_and_one_check(monkeypatch):
    """A second load of the same tokenizer.json bytes reuses the first one's Rust tokenizer and skips the document
    check it passed; other bytes are built and checked on their own; private copies stay private."""
    text = (ASSETS / "tokenizers" / "gpt2" / "tokenizer.json").read_text(encoding="utf-8")
    first = LoadedTokenizer.from_json_text(text, "a")
    checks: list[str] = []
    real_check = view.check_document
    monkeypatch.setattr(
        view, "check_document", lambda doc, name: checks.append(name) or real_check(doc, name)
    )
    again = LoadedTokenizer.from_json_text(text, "b")
    assert again.tokenizer is first.tokenizer and checks == []
    assert (
        again.vocab is first.vocab and again.id_to_token is first.id_to_token
    )  # read-only views, shared too
    assert again.fresh_tokenizer() is not first.tokenizer
    assert (
        again.vocab == first.vocab
        and again.fresh_tokenizer().encode("héllo wörld").ids == first.tokenizer.encode("héllo wörld").ids
    )
    doc = first.document()
    doc["model"]["vocab"]["zzzz-not-in-gpt2"] = max(doc["model"]["vocab"].values()) + 1
    other = LoadedTokenizer.from_json_text(json.dumps(doc), "c")
    assert checks == ["c"] and other.tokenizer is not first.tokenizer
    assert other.tokenizer.token_to_id("zzzz-not-in-gpt2") is not None
    assert first.tokenizer.token_to_id("zzzz-not-in-gpt2") is None


def test_a_refused_document_is_refused_again_and_the_shared_tokenizers_stay_bounded(monkeypatch):
    bad = json.dumps({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})
    for _ in range(2):  # nothing about a refused document is remembered
        with pytest.raises(TokenizerLoadError, match="share id 0"):
            LoadedTokenizer.from_json_text(bad, "bad")
    monkeypatch.setattr(shared_views, "SHARED", shared_views.SharedViews())
    monkeypatch.setattr(shared_views, "SHARED_MAX_COUNT", 2)
    doc = load_shared("gpt2").document()
    views = []
    for k in range(3):
        doc["model"]["vocab"][f"zz{k}"] = len(doc["model"]["vocab"])
        views.append(LoadedTokenizer.from_document(json.loads(json.dumps(doc)), f"v{k}"))
    assert len(shared_views.SHARED._built) == 2 and views[0].digest not in shared_views.SHARED._built
    assert (
        views[2].id_to_token[len(doc["model"]["vocab"]) - 1] == "zz2"
        and views[2].digest in shared_views.SHARED._views
    )
    assert (
        views[0].id_to_token[len(doc["model"]["vocab"]) - 3] == "zz0"
        and views[0].digest not in shared_views.SHARED._views
    )
    assert LoadedTokenizer.from_json_text(views[0].to_json(), "again").tokenizer is not views[0].tokenizer


def _waiting_on_a_future(thread: threading.Thread) -> bool:
    """Whether `thread` is blocked in `Future.result()` (read from its live stack, not from timing)."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "result" and "concurrent" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def test_two_views_of_the_same_new_bytes_at_once_build_one_tokenizer():
    """The server's warm-up and a first visitor (or two sessions opening one upload) loading the same new file at
    the same moment share one build: the second waits for the first's instead of building its own."""
    shared = shared_views.SharedViews()
    started, release = threading.Event(), threading.Event()
    builds: list[str] = []
    tok = load_shared("gpt2").tokenizer

    def build(who: str):
        builds.append(who)
        started.set()
        assert release.wait(60), "the first build was never released"
        return tok

    got: list = []
    first = threading.Thread(target=lambda: got.append(shared.tokenizer("d" * 64, 10, lambda: build("1"))))
    first.start()
    assert started.wait(60)
    second = threading.Thread(target=lambda: got.append(shared.tokenizer("d" * 64, 10, lambda: build("2"))))
    second.start()
    deadline = time.monotonic() + 60  # the twin either waits for the first build or (the bug) starts its own
    while "2" not in builds and not _waiting_on_a_future(second):
        assert time.monotonic() < deadline, "the second view neither waited nor built"
        time.sleep(0.01)
    release.set()
    first.join(60)
    second.join(60)
    assert builds == ["1"] and got == [tok, tok]
    assert shared.tokenizer("d" * 64, 10, lambda: build("3")) is tok and builds == ["1"]  # kept
