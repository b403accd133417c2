"""R-BPE token reuse (analysis/methods/reuse/reuse.py): classification, choice, maps, encode/decode, save/load, CLI
(the page: tests/app/test_reuse_page.py)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import subprocess
import sys
import unicodedata

import numpy as np
import pytest
from support import ROOT, TOKENIZERS, flores_lines, load_shared

from analysis.core import unicode
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.methods import reuse
from analysis.methods.reuse import measures as reuse_measures
from analysis.methods.reuse import protect as reuse_protect
from analysis.texts import flores
from analysis.texts.flores import FLORES_TRAIN_LINES
from analysis.tokenizer.alphabets import BYTE_TO_CHAR

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


def test_robustness_of_rbpe_uses_its_own_encoder(llama_rt):
    """R-BPE's robustness rows come from its own encoder (Arabic through the new tokenizer), English is untouched."""
    rob = reuse_measures.reuse_robustness(
        llama_rt,
        {"arb_Arab": HELDOUT[:60], "eng_Latn": ENG_HELDOUT[:60]},
        pathological={"one character": "a" * 4096},
    )
    arb, eng = rob.languages
    assert arb.split_changed > 0 and eng.split_changed == 0 and eng.strr_after == eng.strr_before
    assert rob.after.round_trip_total == rob.before.round_trip_total
    assert [e["input"] for e in rob.after.encode_seconds] == [
        "one character"
    ]  # timed through R-BPE's encoder


def test_decode_refuses_what_is_not_a_token_id(llama_rt):
    """The library's decode raises OverflowError on a negative id; the reuse tokenizer says what is wrong."""
    for ids in ([-1], [1, 2, -5], [1.5], [True]):
        with pytest.raises(DataError, match="is not a token id"):
            llama_rt.decode(ids)
    assert llama_rt.decode([]) == ""
    assert llama_rt.decode(list(np.array(llama_rt.encode("Tere")))) == "Tere"  # numpy ids are ids


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


@pytest.mark.slow
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
    # the tagged encoding gives the same ids, and the new tokenizer's id wherever it encoded
    tagged = llama_rt.encode_batch_tagged(mixed)
    assert [ids for ids, _ in tagged] == llama_rt.encode_batch(mixed)
    for ids, tags in tagged:
        assert all(t == -1 or llama_rt.new_to_old[t] == i for i, t in zip(ids, tags)) and max(tags) >= 0
    # emoji split over byte tokens next to Arabic: the window pass repairs the partial UTF-8 groups
    calls = []
    window = llama_rt._window_segments
    monkeypatch.setattr(llama_rt, "_window_segments", lambda ids, skip: calls.append(1) or window(ids, skip))
    for text in ("مرحبا 😀🙂 بكم", "🧑‍🔬مرحبا", "ب😀"):
        assert llama_rt.decode(llama_rt.encode(text)) == text
    assert len(calls) == 3


def test_fertility_lower_and_ids_inside_the_model(llama_rt):
    tok = load_shared("llama-3.1")
    cmp = reuse_measures.compare(llama_rt, HELDOUT, ENG_HELDOUT)
    before, after = cmp["before"], cmp["after"]
    assert after["fertility"] < before["fertility"] * 0.95
    # the paper's Table 3 measures: premium vs English (Petrov et al.) and continued words both drop
    assert after["premium"] < before["premium"] and after["parity_corpus"] < before["parity_corpus"]
    assert after["continued_words"] < before["continued_words"]
    assert 1.5 < before["premium"] < 2.0  # the paper: 1.67 for Llama-3.1 on FLORES-200 devtest
    # English is encoded by the old tokenizer: every measure is unchanged
    eng = reuse_measures.compare(llama_rt, ENG_HELDOUT, ENG_HELDOUT)
    assert eng["before"] == eng["after"] and eng["after"]["premium"] == 1.0
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
    demo = reuse_measures.reused_script_demo(llama_rt, "Привет, как дела?")
    assert demo["n_reused"] > 0
    assert demo["decoded"] != demo["text"]
    assert any(unicode.block(c) == "Arabic" for c in demo["decoded"])


def test_one_decoding_of_the_whole_line_gives_the_run_by_run_text(llama_rt, monkeypatch):
    """`decode` decodes a line's bytes at once where that provably equals decoding each run on its own (valid
    UTF-8, every run starting at a character): the same text as the run-by-run decoding and its window pass, on
    whole lines of six scripts and on cut ones (a character split at either end)."""
    lines = [x for lang in ("eng_Latn", "rus_Cyrl", "arb_Arab", "mya_Mymr", "zho_Hans", "hin_Deva")
             for x in flores_lines(lang)[FLORES_TRAIN_LINES : FLORES_TRAIN_LINES + 25]]  # fmt: skip
    lines += ["ab😀c مرحبا ✓", "", "ὕδωρ — вода"]
    seqs = [ids for x in llama_rt.encode_batch(lines) for ids in (x, x[1:], x[:-1], x[2:-3])]
    kinds = set()
    for ids in seqs:
        whole, first = llama_rt._whole_text(ids), llama_rt._join(llama_rt._runs(ids), False)
        kinds.add(type(whole).__name__)
        assert whole == first if isinstance(whole, str) else (whole is None or "\ufffd" in first), ids
    assert {"str", "bool", "NoneType"} <= kinds  # one decoding, a split character, the empty sequence
    fast = [llama_rt.decode(ids) for ids in seqs]
    monkeypatch.setattr(reuse.ReuseTokenizer, "_whole_text", lambda self, ids: None)
    assert fast == [llama_rt.decode(ids) for ids in seqs]


def test_the_window_pass_on_bytes_groups_as_the_window_pass_on_the_decoders(llama_rt):
    """`_window_segments_bytes` (lazy incremental UTF-8 decoding) finds the same segments as the window pass that
    asks the Rust decoders, on lines of byte-heavy scripts, cut lines, emoji, a literal U+FFFD and bare byte
    tokens around reused ids."""
    lines = [x for lang in ("bod_Tibt", "mya_Mymr", "zho_Hans", "arb_Arab", "amh_Ethi", "kor_Hang")
             for x in flores_lines(lang)[FLORES_TRAIN_LINES : FLORES_TRAIN_LINES + 8]]  # fmt: skip
    lines += ["ab😀c مرحبا ✓", "ب😀🙂", "x \ufffd مرحبا \ufffd", "🧑‍🔬مرحبا"]
    seqs = [ids for x in llama_rt.encode_batch(lines) for ids in (x, x[1:], x[:-1], x[2:-3])]
    repl, reused = sorted(llama_rt.replacement_ids)[:40], sorted(llama_rt.reused_ids)[:40]
    seqs += [[repl[k % 40], reused[k % 40], repl[(3 * k) % 40], repl[(7 * k) % 40]] for k in range(40)]
    generic = copy.copy(llama_rt)
    generic._fast = False  # every run through the tokenizers' decoders: the reference window pass
    for ids in seqs:
        assert llama_rt._fast_text(ids, True) is not None
        assert llama_rt._window_segments_bytes(ids) == generic._window_segments(ids, False), ids


def test_round_trips_agrees_with_decoding_and_comparing(llama_rt):
    """`round_trips(ids, text)` (no decoding where the ids' bytes already differ from the text's) says exactly what
    `decode(ids) == text` says: lines of a target, reused, kept and byte-heavy script whole and cut, each against
    its own text, a neighbour's, its text with a literal U+FFFD, and its text with one character changed."""
    lines = [x for lang in ("eng_Latn", "arb_Arab", "rus_Cyrl", "zho_Hans", "mya_Mymr", "ory_Orya")
             for x in flores_lines(lang)[FLORES_TRAIN_LINES : FLORES_TRAIN_LINES + 6]]  # fmt: skip
    lines += ["ab😀c مرحبا ✓", "", "x \ufffd مرحبا", "Привет, как дела?"]
    seqs = llama_rt.encode_batch(lines)
    cases = []
    for k, (line, ids) in enumerate(zip(lines, seqs)):
        changed = line[:-1] + "x" if line else "x"
        for text in (line, lines[k - 1], line + "\ufffd", changed, llama_rt.decode(ids)):
            cases += [(ids, text), (ids[1:], text), (ids[:-1], text)]
    got = [llama_rt.round_trips(ids, text) for ids, text in cases]
    assert got == [llama_rt.decode(ids) == text for ids, text in cases]
    assert True in got and False in got
    kept = [llama_rt.round_trips(ids, line) for line, ids in zip(lines, seqs)]
    assert kept[0] and not kept[12]  # English comes back; Russian's reused ids decode as Arabic


def test_round_trips_on_byte_offsets_agrees_with_the_window_pass(llama_rt):
    """Where a line's bytes are right but a run starts inside a character, `round_trips` decides on byte offsets
    what the window pass decides by decoding. Random token sequences with a line's exact bytes (every piece a
    vocabulary token: mapped, not mapped, reused, replacement ids), against `decode(ids) == line`, with the
    mapping's replacement ids and with half of them (a mapping file names its own: the window pass then fails
    where it would have grouped)."""
    table, added = llama_rt._byte_table()
    by_bytes: dict[bytes, list[int]] = {}
    for i, b in enumerate(table):
        if b and i not in added:
            by_bytes.setdefault(b, []).append(i)
    rng = random.Random(7)

    def pieces(line: str) -> list[int]:
        data, ids, p = line.encode("utf-8"), [], 0
        while p < len(data):
            k = rng.choice([k for k in range(1, 9) if data[p : p + k] in by_bytes])
            ids.append(rng.choice(by_bytes[data[p : p + k]]))
            p += k
        return ids

    half = dataclasses.replace(llama_rt, replacement_ids=frozenset(sorted(llama_rt.replacement_ids)[::2]))
    for rt in (llama_rt, half):
        outcomes = set()
        for lang in ("amh_Ethi", "mya_Mymr", "kat_Geor", "yor_Latn", "arb_Arab", "zho_Hans"):
            for line in flores_lines(lang)[FLORES_TRAIN_LINES : FLORES_TRAIN_LINES + 8]:
                for _ in range(3):
                    ids = pieces(line)
                    window = rt._whole_text(ids) is False  # the first pass splits a character
                    got = rt.round_trips(ids, line)
                    assert got == (rt.decode(ids) == line), (lang, ids)
                    outcomes.add((window, got))
        assert (True, True) in outcomes and (False, True) in outcomes
    assert (True, False) in outcomes  # with half the replacement ids some splits stay
    # a reused id never joins an old-tokenizer run: an old token ending inside a character, then the reused id
    # whose (new) bytes complete it — a window the first token opens may not take it
    o2n, repl = llama_rt.old_to_new, llama_rt.replacement_ids
    pairs = []
    for r in sorted(i for i in llama_rt.reused_ids if table[i][0] & 0xC0 == 0x80):
        for u, b in enumerate(table):
            if b and u in repl and u not in o2n and u not in added:
                try:
                    pairs.append(([u, r], (b + table[r]).decode("utf-8")))
                except UnicodeDecodeError:
                    continue
    assert pairs
    for ids, text in pairs[:40]:
        got = llama_rt.round_trips(ids, text)
        assert got == (llama_rt.decode(ids) == text) and not got, (
            ids
        )  # the old token decodes a broken character


def test_the_before_side_is_the_old_tokenizers_encoding_of_every_line(llama_rt):
    """`_encode` reuses R-BPE's ids of a line without target-script text as the old tokenizer's encoding."""
    lines = ["", "plain English", "русский текст", *HELDOUT[:5], "mixed: مرحبا and hello", " ", "١٢٣ ✓"]
    enc = reuse_measures._encode(llama_rt, lines)
    old = llama_rt.old.tokenizer.encode_batch(lines, add_special_tokens=False)
    assert enc["old"] == [e.ids for e in old] and enc["len_old"].tolist() == [len(e.ids) for e in old]
    assert enc["new"] == llama_rt.encode_batch(lines)


def test_deterministic_maps(llama_rt):
    again = _build("llama-3.1")
    assert again.new_to_old == llama_rt.new_to_old
    assert again.reused_ids == llama_rt.reused_ids


def test_qwen3_fertility_lower():
    rt = _build("qwen3")
    tok = load_shared("qwen3")
    cmp = reuse_measures.compare(rt, HELDOUT)
    assert cmp["after"]["fertility"] < cmp["before"]["fertility"]
    assert max(rt.new_to_old.values()) < tok.vocab_size
    sample = HELDOUT[:40] + ENG_HELDOUT[:40]
    assert [rt.decode(x) for x in rt.encode_batch(sample)] == sample


@pytest.mark.slow
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


@pytest.mark.slow
def test_load_refuses_hostile_mapping_files(llama_rt, tmp_path):
    """The mapping file goes through the guarded JSON reader: deep nesting, a non-object, missing or wrong
    fields and a broken new tokenizer are DataErrors, never RecursionError, AttributeError or KeyError."""
    folder = llama_rt.save(tmp_path / "rbpe")
    mp = folder / reuse.MAPPING_FILE
    good = mp.read_bytes()
    for bad, match in (
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"[1, 2]", "unknown format"),
        (b'{"format": "\xff"}', "not UTF-8"),
        (json.dumps({"format": reuse.FORMAT, "new_to_old": [[1]]}).encode(), "not an R-BPE mapping"),
        (
            json.dumps(
                {
                    "format": reuse.FORMAT,
                    "new_to_old": [],
                    "target_blocks": [],
                    "replacement_ids": [],
                    "reused_ids": [],
                    "info": [1],
                }
            ).encode(),
            "'info' must be an object",
        ),  # fmt: skip
    ):
        mp.write_bytes(bad)
        with pytest.raises(DataError, match=match):
            reuse.ReuseTokenizer.load(folder)
    mp.write_bytes(good)
    (folder / "new_tokenizer" / "tokenizer.json").write_text('{"model": 1}')
    with pytest.raises(DataError, match="not a tokenizer.json"):
        reuse.ReuseTokenizer.load(folder)


def test_unsupported_tokenizer_is_refused():
    with pytest.raises(UnsupportedTokenizerError, match="byte-level BPE"):
        reuse.build_reuse_tokenizer(load_shared("llama-2"), TRAIN[:10])


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "analysis", "reuse", str(TOKENIZERS / "llama-3.1"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )


@pytest.mark.slow
def test_cli_json_without_collateral(tmp_path):
    out = tmp_path / "cli"
    paper = ("--paper-exact",)  # the paper's Table 2 count: no protections
    r = _cli(
        "--target", "arabic", "--no-corpora", "--collateral", "none", "--out", str(out), "--json", *paper
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert (
        rep["reusable_count"] == 16632 and "Cyrillic" in rep["selected_classes"] and rep["rules"] == "paper"
    )
    h = rep["heldout"]
    assert h["after"]["fertility"] < h["before"]["fertility"] and h["fertility_change"] < 0
    assert h["after"]["premium"] < h["before"]["premium"]
    assert "collateral" not in rep
    assert (out / reuse.MAPPING_FILE).is_file()
    # a non-empty output folder is refused unless asked to replace it
    again = _cli("--no-corpora", "--collateral", "none", "--out", str(out))
    assert again.returncode == 2 and "not empty" in again.stderr
    assert _cli("--no-corpora", "--collateral", "none", "--out", str(out), "--force").returncode == 0
    bad = _cli("--no-corpora", "--protect", "everything")
    assert bad.returncode == 2 and "unknown protection" in bad.stderr


@pytest.mark.slow
def test_cli_json_collateral_for_every_flores_language():
    r = _cli("--target", "arabic", "--paper-exact", "--json")  # the paper's setting: shared symbols reusable
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    rows = rep["collateral"]
    assert len(rows) == 204 and len({row["lang"] for row in rows}) == 204
    by = {row["lang"]: row for row in rows}
    assert by["eng_Latn"]["round_trip"] and by["eng_Latn"]["ids_changed"] == 0
    assert not by["rus_Cyrl"]["round_trip"] and by["rus_Cyrl"]["role"] == "reused"
    assert not by["ory_Orya"]["round_trip"] and by["ory_Orya"]["role"] == "kept"  # the danda is reused
    assert by["arb_Arab"]["role"] == "target" and by["arb_Arab"]["round_trip"]
    s = rep["collateral_summary"]
    assert s["not_round_trip"] == sum(not row["round_trip"] for row in rows)
    assert "ory_Orya" in s["kept_languages_broken"]
    assert rep["fertility_by_class"]["Arabic"]["after"] < rep["fertility_by_class"]["Arabic"]["before"]
    assert rep["fertility_by_class"]["English"]["after"] == rep["fertility_by_class"]["English"]["before"]


def test_report_schema_with_collateral(llama_rt):
    """The collateral keys appear once the table is measured, as the CLI prints them."""
    rep = reuse_measures.measure_reuse(llama_rt, "arb_Arab", "eng_Latn", seconds=1.5)
    doc = rep.to_json()
    assert doc["seconds"] == 1.5 and "collateral" not in doc and "classes" not in doc
    rep.collateral = reuse_measures.collateral(llama_rt, ["eng_Latn", "rus_Cyrl", "arb_Arab"])
    rep.collateral_split = "heldout"
    doc = rep.to_json()
    assert [r["lang"] for r in doc["collateral"]] == ["eng_Latn", "rus_Cyrl", "arb_Arab"]
    assert doc["collateral_summary"] == reuse_measures.collateral_summary(doc["collateral"])
    assert set(doc["fertility_by_class"]) == {"English", "Russian", "Arabic"}


# ------------------------------------------------------------------------------- what the reuse breaks
def test_the_collateral_table_is_stored_and_read_back_per_tokenizer_and_text(llama_rt, tmp_path, monkeypatch):
    """A second request for the same table (same R-BPE tokenizer, languages, split, reference, FLORES texts) reads
    the disk store; another tokenizer, other languages or a damaged store file compute it again."""
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    langs = ["eng_Latn", "rus_Cyrl", "ory_Orya"]
    computed: list[list[str]] = []
    real = reuse_measures._collateral_rows
    monkeypatch.setattr(
        reuse_measures,
        "_collateral_rows",
        lambda rt, codes, *a: computed.append(list(codes)) or real(rt, codes, *a),
    )
    first = reuse_measures.collateral(llama_rt, langs)
    again = reuse_measures.collateral(llama_rt, langs)
    assert computed == [langs] and again == json.loads(json.dumps(first))  # the same rows, as JSON keeps them
    reuse_measures.collateral(llama_rt, langs[:2])
    reuse_measures.collateral(llama_rt, langs, split="all")
    assert computed == [langs, langs[:2], langs]
    other = copy.copy(llama_rt)  # the same tokenizers with one more reused id: another content hash
    other.__dict__.pop("content_hash", None)
    other.reused_ids = llama_rt.reused_ids | {0}
    assert other.content_hash != llama_rt.content_hash
    reuse_measures.collateral(other, langs)
    assert len(computed) == 4
    for p in (tmp_path / "store" / "reuse-collateral").glob("*.json"):
        p.write_text("{not json", encoding="utf-8")
    assert reuse_measures.collateral(llama_rt, langs) == again and len(computed) == 5


def test_collateral_rows(llama_rt):
    rows = reuse_measures.collateral(llama_rt, ["eng_Latn", "rus_Cyrl", "ory_Orya", "arb_Arab"])
    by = {r["lang"]: r for r in rows}
    assert [r["lang"] for r in rows] == ["eng_Latn", "rus_Cyrl", "ory_Orya", "arb_Arab"]
    assert (
        by["eng_Latn"]["round_trip"]
        and by["eng_Latn"]["example"] is None
        and by["eng_Latn"]["role"] == "kept"
    )
    assert by["eng_Latn"]["premium_before"] == by["eng_Latn"]["premium_after"] == 1.0
    rus = by["rus_Cyrl"]
    assert rus["role"] == "reused" and not rus["round_trip"] and rus["broken_lines"] == rus["lines"]
    assert rus["ids_changed"] > 0.3 and rus["tokens_before"] == rus["tokens_after"]
    assert any(unicode.block(c) == "Arabic" for c in rus["example"]["decoded"])
    # Oriya keeps its script, but the Devanagari danda "।" it uses sits on a reused id
    ory = by["ory_Orya"]
    assert ory["role"] == "kept" and not ory["round_trip"] and 0 < ory["ids_changed"] < 0.05
    assert "।" in ory["example"]["text"] and "।" not in ory["example"]["decoded"]
    arb = by["arb_Arab"]
    assert arb["role"] == "target" and arb["round_trip"] and arb["fertility_after"] < arb["fertility_before"]
    summary = reuse_measures.collateral_summary(rows)
    assert summary == {
        "languages": 4,
        "not_round_trip": 2,
        "not_round_trip_by_role": {"kept": 1, "reused": 1},
        "kept_languages_broken": ["ory_Orya"],
    }
    assert set(reuse_measures.fertility_by_class(rows)) == {"Arabic", "English", "Russian"}


def test_protecting_shared_symbols_keeps_oriya_and_gurmukhi():
    tok = load_shared("llama-3.1")
    danda = tok.tokenizer.encode("।", add_special_tokens=False).ids
    heart = tok.tokenizer.encode("❤", add_special_tokens=False).ids
    rt = reuse.build_reuse_tokenizer(tok, TRAIN, protect=("symbols",))
    plain = reuse.choose_reusable(reuse.classify_vocab(tok), "arabic", ("latin", "greek"), 20000)
    assert set(danda) <= set(plain.reusable_ids) and not set(danda) & set(rt.reused_ids)
    assert rt.info["protected_count"] > 0 and rt.info["reusable_count"] == 16632 - rt.info["protected_count"]
    assert all(reuse.is_shared_symbol(reuse.standalone_text(tok, tok.id_to_token[i])) for i in danda + heart)
    assert not reuse.is_shared_symbol("мир") and not reuse.is_shared_symbol("\ufffd")
    # the per-tokenizer set is the per-id test, on the reusable ids and on the whole vocabulary
    each = {i for i, t in tok.id_to_token.items() if reuse.is_shared_symbol(reuse.standalone_text(tok, t))}
    assert reuse.all_shared_symbol_ids(tok) == each and len(each) > 1000
    assert reuse.shared_symbol_ids(tok, plain.reusable_ids) == sorted(each & set(plain.reusable_ids))
    assert reuse.shared_symbol_ids(tok, [*danda, *danda]) == danda
    for text in ("Great work ✔ ❤", *flores_lines("ory_Orya")[:20], *flores_lines("pan_Guru")[:20]):
        assert rt.decode(rt.encode(text)) == text
    rows = reuse_measures.collateral(rt, ["ory_Orya", "pan_Guru", "rus_Cyrl"])
    assert [r["round_trip"] for r in rows] == [True, True, False]
    with pytest.raises(DataError, match="unknown protection"):
        reuse.build_reuse_tokenizer(tok, TRAIN, protect=("all",))


def test_usage_protection_ids_are_encoded_once_and_read_back_from_the_disk_store(tmp_path, monkeypatch):
    """`usage` protects the reusable ids that the FLORES training lines of kept-script languages encode to: exactly
    those (an independent encoding of the same lines), stored on disk, so a new process (memo cleared) reads them
    back without encoding; other ids, other FLORES languages or a damaged store file encode again. (Five languages
    here; the documented `--protect symbols,usage` command runs it on all 204.)"""
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    codes = ["eng_Latn", "ory_Orya", "pan_Guru", "rus_Cyrl", "arb_Arab"]
    monkeypatch.setattr(flores, "available_codes", lambda *a: list(codes))
    tok = load_shared("llama-3.1")
    plan = reuse.choose_reusable(reuse.classify_vocab(tok), "arabic", ("latin", "greek"), 20000)
    wanted = set(plan.reusable_ids)
    blocks = (plan.target_blocks, plan.reusable_blocks)
    roles = {c: reuse.language_role(flores_lines(c)[:50], *blocks) for c in codes}
    assert roles == {"eng_Latn": "kept", "ory_Orya": "kept", "pan_Guru": "kept", "rus_Cyrl": "reused",
                     "arb_Arab": "target"}  # fmt: skip

    def used_by(kept):  # every id the kept languages' training lines encode to
        lines = [x for c in kept for x in flores_lines(c)[:FLORES_TRAIN_LINES]]
        return {i for e in tok.tokenizer.encode_batch(lines, add_special_tokens=False) for i in e.ids}

    used = used_by(codes[:3])
    encoded: list[str] = []
    real = flores.split_lines
    monkeypatch.setattr(flores, "split_lines", lambda code, *a: encoded.append(code) or real(code, *a))

    def fresh(ids):  # a new process: nothing in memory
        reuse_protect._usage_ids.cache_clear()
        encoded.clear()
        return reuse.usage_ids(tok, plan, ids)

    first = fresh(plan.reusable_ids)
    assert first == sorted(used & wanted) and encoded == codes
    danda = tok.tokenizer.encode("।", add_special_tokens=False).ids
    assert set(danda) <= set(first)  # Oriya's and Gurmukhi's full stop sits on a reusable Devanagari id
    assert fresh(plan.reusable_ids) == first and encoded == []  # read back
    fewer = sorted(wanted)[: len(wanted) // 2]
    assert fresh(fewer) == sorted(used & set(fewer)) and encoded == codes  # other ids
    codes.pop(1)  # no Oriya: other FLORES data
    assert fresh(plan.reusable_ids) == sorted(used_by(["eng_Latn", "pan_Guru"]) & wanted) and encoded == codes
    for p in (tmp_path / "store" / "reuse-usage").glob("*.json"):
        p.write_text("[1, 2", encoding="utf-8")
    codes.insert(1, "ory_Orya")
    assert fresh(plan.reusable_ids) == first and encoded == codes  # a damaged file: encoded again
    reuse_protect._usage_ids.cache_clear()


def test_min_frequency_and_training_text_choice():
    tok = load_shared("llama-3.1")
    # FLORES-only training stops early at min_frequency 2; 0 lets the new vocabulary grow
    two = reuse.build_reuse_tokenizer(tok, TRAIN, min_frequency=2)
    zero = reuse.build_reuse_tokenizer(tok, TRAIN, min_frequency=0)
    assert two.info["new_vocab_size"] < zero.info["new_vocab_size"] <= 16632 + len(tok.added_tokens)
    assert zero.info["min_frequency"] == 0
    texts = reuse.target_training_texts(
        "arb_Arab", flores_train=False, corpora=False, extra=["مرحبا بكم", " "]
    )
    assert texts == ["مرحبا بكم"]
    with_flores = reuse.target_training_texts("arb_Arab", corpora=False, extra=["مرحبا"])
    assert with_flores[:-1] == TRAIN and with_flores[-1] == "مرحبا"
    assert [p.name for p in reuse.corpus_files("arb_Arab")] == [
        "arb_Arab.txt.gz",
        "arb_Arab.ui.txt.gz",
        "arb_Arab.wordfreq.tsv.gz",
    ]
    with pytest.raises(DataError, match="no training text"):
        reuse.target_training_texts("arb_Arab", flores_train=False, corpora=False)
    with pytest.raises(DataError, match="negative"):
        reuse.build_reuse_tokenizer(tok, TRAIN, min_frequency=-1)


def test_parity_aware_target_tokenizer():
    tok = load_shared("llama-3.1")
    langs = ["arb_Arab", "urd_Arab", "pes_Arab"]
    rt = reuse.build_reuse_tokenizer(tok, TRAIN, trainer="parity", parity_langs=langs, train_lang="arb_Arab")
    assert rt.info["trainer"] == "parity" and rt.info["parity_langs"] == langs
    assert rt.info["new_vocab_size"] <= 16632 + len(tok.added_tokens)
    plain = reuse.build_reuse_tokenizer(tok, TRAIN)
    urd = flores_lines("urd_Arab")[FLORES_TRAIN_LINES:]
    # trained on Urdu and Persian too, the parity-aware target tokenizer serves Urdu better than Arabic-only BPE
    assert (
        reuse_measures.compare(rt, urd)["after"]["tokens"]
        < reuse_measures.compare(plain, urd)["after"]["tokens"]
    )
    assert [rt.decode(x) for x in rt.encode_batch(HELDOUT[:30] + urd[:30])] == HELDOUT[:30] + urd[:30]
    with pytest.raises(DataError, match="unknown trainer"):
        reuse.build_reuse_tokenizer(tok, TRAIN, trainer="unigram")


def test_new_tokenizer_spends_no_vocabulary_on_bytes_utf8_never_has():
    """C0, C1 and F5–FF never occur in UTF-8 text: the new tokenizer's alphabet leaves them out."""
    new = reuse.train_target_bpe(load_shared("gpt2"), ["مرحبا بالعالم"] * 20, 300)
    vocab = new.get_vocab()
    never = [BYTE_TO_CHAR[b] for b in reuse.NON_UTF8_BYTES]
    assert len(never) == 13 and not [c for c in never if c in vocab]
    assert BYTE_TO_CHAR[0xD8] in vocab and BYTE_TO_CHAR[0x00] in vocab  # every other byte stays
