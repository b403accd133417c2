"""R-BPE token reuse (analysis/reuse.py): classification, choice, maps, encode/decode, save/load, CLI, page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, TOKENIZERS, flores_lines, load_shared

from analysis import reuse, unicode
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.flores import FLORES_TRAIN_LINES

ARB = flores_lines("arb_Arab")
ENG = flores_lines("eng_Latn")
TRAIN, HELDOUT = ARB[:FLORES_TRAIN_LINES], ARB[FLORES_TRAIN_LINES:]
ENG_HELDOUT = ENG[FLORES_TRAIN_LINES:]


def _build(name: str) -> reuse.ReuseTokenizer:
    return reuse.build_reuse_tokenizer(
        load_shared(name), TRAIN, target="arabic", preserved=("latin", "greek")
    )


@pytest.fixture(scope="module")
def llama_rt() -> reuse.ReuseTokenizer:
    return _build("llama-3.1")


def test_block_table_agrees_with_character_names():
    blocks = unicode.blocks()
    assert all(a.end < b.start for a, b in zip(blocks, blocks[1:]))  # sorted, disjoint
    prefixes = {
        "Arabic": "ARABIC",
        "Cyrillic": "CYRILLIC",
        "Hebrew": "HEBREW",
        "Devanagari": "DEVANAGARI",
        "Thai": "THAI",
        "Armenian": "ARMENIAN",
        "Georgian": "GEORGIAN",
        "Ethiopic": "ETHIOPIC",
        "Hiragana": "HIRAGANA",
        "Katakana": "KATAKANA",
        "Hangul Syllables": "HANGUL SYLLABLE",
        "CJK Unified Ideographs": "CJK UNIFIED IDEOGRAPH",
        "Greek Extended": "GREEK",
    }
    for block, prefix in prefixes.items():
        b = next(x for x in blocks if x.name == block)
        named = [chr(c) for c in range(b.start, b.end + 1) if unicodedata.name(chr(c), "")]
        assert named, block
        share = sum(unicodedata.name(c).startswith(prefix) for c in named) / len(named)
        assert share > 0.9, (block, share)
        assert unicode.block(named[0]) == block
    assert unicode.block("\ufffd") == "Specials"
    assert unicode.block("\u2014") == "General Punctuation"
    assert unicode.block(chr(0x0378)) == "Greek and Coptic"  # unassigned, inside the block


def test_classification_sanity():
    tok = load_shared("llama-3.1")
    vc = reuse.classify_vocab(tok)
    by_id = {i: c for c, ids in vc.classes.items() for i in ids}
    for text, cls in (
        ("ال", "Arabic_merged"),
        (" the", "Latin_merged"),
        ("ения", "Cyrillic"),
        ("の", "Hiragana"),
    ):
        (tid,) = tok.tokenizer.encode(text, add_special_tokens=False).ids
        assert by_id[tid] == cls, (text, by_id.get(tid))
    partial = [i for i in vc.byte_ids if tok.token_bytes(tok.id_to_token[i])[0] >= 0x80]
    assert len(partial) == 128 and all(by_id[i] == "Specials" for i in partial)
    assert set(partial) <= set(vc.replacement_ids)
    assert set(vc.special_ids) == set(tok.added_ids) and not set(vc.special_ids) & set(by_id)
    assert reuse.text_labels("мир hello") == ("Cyrillic", "Latin_merged")
    assert reuse.text_labels("\u2014\u2581") == ()


@pytest.mark.parametrize("rules", reuse.RULES)
def test_kana_and_cjk_grouping(rules):
    # CJK drops out only when every label is kana or CJK; Hiragana + Katakana together make Katakana_Hiragana
    assert reuse.text_labels("カタカナ漢字", rules) == ("Katakana",)
    assert reuse.text_labels("の人", rules) == ("Hiragana",)
    assert reuse.text_labels("ひらがなカタカナ", rules) == ("Katakana_Hiragana",)
    assert reuse.text_labels("ひらがなカタカナ漢字", rules) == ("Katakana_Hiragana",)
    assert reuse.text_labels("漢字", rules) == ("CJK_merged",)
    assert reuse.text_labels("の人мир", rules) == ("CJK_merged", "Cyrillic", "Hiragana")


def test_paper_rules_block_table():
    names = {unicode.normalize_name(b.name) for b in unicode.blocks()}
    assert len(reuse.PAPER_BLOCKS) == 122
    assert all(unicode.normalize_name(n) in names for n in reuse.PAPER_BLOCKS)
    # a block added after Unicode 4.0, and the C0 controls, are outside the first release's table
    assert reuse.text_labels("\u1200", "paper") == (
        "Ethiopic",
    )  # in the table, though not an eligible keyword
    assert reuse.text_labels("\u2d30", "paper") == ("Unknown",)  # Tifinagh (Unicode 4.1) is not
    assert reuse.text_labels("\u2d30", "unicode17") == ("Tifinagh",)
    assert reuse.text_labels("\u0430\x01", "paper") == ("Cyrillic", "Unknown")
    assert reuse.text_labels("\u0430\x01", "unicode17") == ("Cyrillic", "Latin_merged")
    assert reuse.is_eligible("Cyrillic_Unknown", "paper") and not reuse.is_eligible("Ethiopic", "paper")
    assert reuse.is_eligible("Ethiopic", "unicode17") and not reuse.is_eligible("Unknown", "unicode17")
    with pytest.raises(DataError, match="unknown class rules"):
        reuse.classify_vocab(load_shared("gpt2"), "unicode4")


# Hamdan et al. (EMNLP 2025), Table 2 (Llama-3.1, Arabic target): preserved scripts → (|L_R|, |S_R|)
TABLE2 = {
    ("latin", "cjk", "cyrillic", "greek", "thai"): (15, 1035),
    ("latin", "cjk", "cyrillic", "greek"): (17, 2419),
    ("latin", "cjk", "cyrillic"): (19, 3806),
    ("latin", "cjk"): (21, 10268),
    ("latin",): (37, 18019),
    ("latin", "greek"): (35, 16632),
}


@pytest.mark.parametrize("preserved", list(TABLE2))
def test_paper_table2_reusable_ids_llama(preserved):
    vc = reuse.classify_vocab(load_shared("llama-3.1"))
    plan = reuse.choose_reusable(vc, "arabic", preserved, 20000)
    assert (len(plan.selected), plan.reusable_count) == TABLE2[preserved]
    # the Unicode 17 rules give the same ids for Llama-3.1
    plan17 = reuse.choose_reusable(
        reuse.classify_vocab(load_shared("llama-3.1"), "unicode17"), "arabic", preserved, 20000
    )
    assert plan17.reusable_count == TABLE2[preserved][1]


def test_paper_table1_qwen3():
    """Table 1: Qwen3 has 41,752 reusable ids in 40 classes (Arabic target, Latin + Greek preserved)."""
    tok = load_shared("qwen3")
    plan = reuse.choose_reusable(reuse.classify_vocab(tok, "paper"), "arabic", ("latin", "greek"), 20000)
    assert (plan.reusable_count, len(plan.selected)) == (41752, 40)
    plan17 = reuse.choose_reusable(
        reuse.classify_vocab(tok, "unicode17"), "arabic", ("latin", "greek"), 20000
    )
    extra = set(plan17.reusable_ids) - set(plan.reusable_ids)
    assert set(plan.reusable_ids) <= set(plan17.reusable_ids) and extra
    assert "Ethiopic" in plan17.selected and "Ethiopic" not in plan.selected


def test_choice_excludes_preserved_and_protected_ids():
    tok = load_shared("llama-3.1")
    vc = reuse.classify_vocab(tok)
    plan = reuse.choose_reusable(vc, "arabic", ("latin", "greek"), 20000)
    assert "Cyrillic" in plan.selected and "Hangul Syllables" in plan.selected
    assert not any(k in c for c in plan.selected for k in ("Arabic", "Latin", "Greek"))
    assert not set(plan.reusable_ids) & (set(vc.byte_ids) | set(vc.special_ids))
    assert plan.reusable_ids == sorted(plan.reusable_ids)
    # smallest first until the threshold: a low threshold stops early
    small = reuse.choose_reusable(vc, "arabic", ("latin", "greek"), 50)
    assert sum(small.selected.values()) >= 50 and len(small.selected) < len(plan.selected)
    assert max(small.selected.values()) <= min(v for k, v in plan.eligible.items() if k not in small.selected)
    # preserving CJK keeps kana and Hangul too
    cjk = reuse.choose_reusable(vc, "arabic", ("latin", "greek", "cjk"), 20000)
    assert not {"Hiragana", "Katakana", "Hangul Syllables", "CJK_merged"} & set(cjk.selected)


def test_training_data_cleaning():
    kept = list(reuse.clean_texts(["مرحبا world", "مرحبا мир", "καλημέρα"], ["Cyrillic"]))
    assert kept == ["مرحبا world", "καλημέρα"]


def test_segmentation_whitespace_joins_current_segment(llama_rt):
    assert llama_rt.segments("  مرحبا بكم hello world مرحبا") == [
        ("  مرحبا بكم ", True),
        ("hello world ", False),
        ("مرحبا", True),
    ]


def test_round_trip_and_english_unchanged(llama_rt, monkeypatch):
    base = load_shared("llama-3.1").tokenizer
    mixed = [f"{a} {e}" for a, e in zip(HELDOUT[:50], ENG_HELDOUT[:50])] + ["مرحبا 123 (test) — ok\n\nسلام"]
    for text in HELDOUT + ENG_HELDOUT + mixed:
        assert llama_rt.decode(llama_rt.encode(text)) == text
    eng = llama_rt.encode_batch(ENG_HELDOUT)
    assert eng == [e.ids for e in base.encode_batch(ENG_HELDOUT, add_special_tokens=False)]
    # emoji split over byte tokens next to Arabic: the window pass repairs the partial UTF-8 groups
    calls = []
    window = llama_rt._window_segments
    monkeypatch.setattr(llama_rt, "_window_segments", lambda ids, skip: calls.append(1) or window(ids, skip))
    for text in ("مرحبا 😀🙂 بكم", "🧑‍🔬مرحبا", "ب😀"):
        assert llama_rt.decode(llama_rt.encode(text)) == text
    assert len(calls) == 3


def test_fertility_lower_and_ids_inside_the_model(llama_rt):
    tok = load_shared("llama-3.1")
    cmp = reuse.compare(llama_rt, HELDOUT, ENG_HELDOUT)
    assert cmp["after"]["fertility"] < cmp["before"]["fertility"] * 0.95
    assert cmp["parity_after"] < cmp["parity_before"]
    ids = [i for x in llama_rt.encode_batch(HELDOUT + ENG_HELDOUT) for i in x]
    assert max(ids) < tok.vocab_size and llama_rt.vocab_size == tok.vocab_size
    assert any(i in llama_rt.reused_ids for i in ids)
    # the maps are inverse, new-only tokens sit on reusable ids, common tokens keep their old id
    assert len(llama_rt.old_to_new) == len(llama_rt.new_to_old)
    vocab = llama_rt.new.get_vocab()
    for token, nid in list(vocab.items())[:2000]:
        old = llama_rt.new_to_old[nid]
        if nid in llama_rt.old_to_new.values() and old not in llama_rt.reused_ids:
            assert tok.id_to_token[old] == token


def test_reused_script_decodes_as_target(llama_rt):
    demo = reuse.reused_script_demo(llama_rt, "Привет, как дела?")
    assert demo["n_reused"] > 0
    assert demo["decoded"] != demo["text"]
    assert any(unicode.block(c) == "Arabic" for c in demo["decoded"])


def test_deterministic_maps(llama_rt):
    again = _build("llama-3.1")
    assert again.new_to_old == llama_rt.new_to_old
    assert again.reused_ids == llama_rt.reused_ids


def test_qwen3_fertility_lower():
    rt = _build("qwen3")
    tok = load_shared("qwen3")
    cmp = reuse.compare(rt, HELDOUT)
    assert cmp["after"]["fertility"] < cmp["before"]["fertility"]
    assert max(rt.new_to_old.values()) < tok.vocab_size
    sample = HELDOUT[:40] + ENG_HELDOUT[:40]
    assert [rt.decode(x) for x in rt.encode_batch(sample)] == sample


def test_save_load_round_trip(llama_rt, tmp_path):
    llama_rt.save(tmp_path / "rbpe")
    assert (tmp_path / "rbpe" / "old_tokenizer" / "tokenizer.json").is_file()
    assert (tmp_path / "rbpe" / "new_tokenizer" / "tokenizer.json").is_file()
    mapping = json.loads((tmp_path / "rbpe" / reuse.MAPPING_FILE).read_text(encoding="utf-8"))
    assert mapping["format"] == reuse.FORMAT and mapping["info"]["base"] == "llama-3.1"
    loaded = reuse.ReuseTokenizer.load(tmp_path / "rbpe")
    sample = HELDOUT[:40] + ENG_HELDOUT[:40]
    assert loaded.encode_batch(sample) == llama_rt.encode_batch(sample)
    assert [loaded.decode(x) for x in llama_rt.encode_batch(sample)] == sample
    assert loaded.new_to_old == llama_rt.new_to_old and loaded.replacement_ids == llama_rt.replacement_ids
    with pytest.raises(DataError, match="not an R-BPE tokenizer folder"):
        reuse.ReuseTokenizer.load(tmp_path)


def test_unsupported_tokenizer_is_refused():
    with pytest.raises(UnsupportedTokenizerError, match="byte-level BPE"):
        reuse.build_reuse_tokenizer(load_shared("llama-2"), TRAIN[:10])


def test_cli_json(tmp_path):
    out = tmp_path / "cli"
    r = subprocess.run(
        [sys.executable, "-m", "analysis", "reuse", str(TOKENIZERS / "llama-3.1")]
        + ["--target", "arabic", "--no-corpora", "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["reusable_count"] > 10000 and "Cyrillic" in rep["selected_classes"]
    assert rep["heldout"]["fertility_after"] < rep["heldout"]["fertility_before"]
    assert (out / reuse.MAPPING_FILE).is_file()


def test_page_trains_previews_and_exports():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/reuse.py").run()
    assert not at.exception, [e.message for e in at.exception]
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["type"] == "bar" and "Cyrillic" in spec["data"][0]["x"]
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Reusable ids"].replace(",", "")) > 10000
    at.button(key="reuse-train").click().run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    table = at.dataframe[-1].value.set_index("language")
    assert table.loc["arb_Arab", "fertility after"] < table.loc["arb_Arab", "fertility before"]
    assert table.loc["eng_Latn", "fertility after"] == table.loc["eng_Latn", "fertility before"]
    assert any("decode as the target" in w.value for w in at.warning)
    assert len(at.get("html")) >= 2
    assert at.get("download_button")
    # another target: the plan updates, the trained Arabic tokenizer is no longer shown
    at.selectbox(key="reuse-target").set_value("greek").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("Train the new tokenizer" in i.value for i in at.info)
