"""Compression metrics against the papers' numbers, the tokenization-scorer vectors, and the cache/CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from support import FLORES, ROOT, flores_lines, load_shared

from analysis.cli import main
from analysis.errors import DataError
from analysis.measure import corpus_counts, grid, renyi, summaries
from analysis.measure import metrics as mx
from analysis.texts import flores as fl
from analysis.tokenizer.tokenizer import LoadedTokenizer


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    grid.clear_cache()
    yield
    grid.clear_cache()


# ------------------------------------------------------------------------------------------ papers
def test_llama31_bytes_per_token_paper000_tables_4_and_9():
    tok = load_shared("llama-3.1")
    assert tok.ignore_merges  # used as the tokenizer has it
    assert round(corpus_counts.bytes_per_token(tok, flores_lines("eng_Latn")), 3) == 4.862
    assert round(corpus_counts.bytes_per_token(tok, flores_lines("est_Latn")), 3) == 2.644
    s = mx.corpus_stats(tok, flores_lines("est_Latn"))
    assert round(s["bytes_per_token"], 3) == 2.644 and s["sentences"] == 1012


def test_qwen_bytes_per_token_methods_reference():
    """methods.md §6: Qwen2.5 (= qwen3's BPE vocabulary) on FLORES+ devtest; FLORES-200 devtest gives the same."""
    tok = load_shared("qwen3")
    assert corpus_counts.bytes_per_token(tok, flores_lines("eng_Latn")) == pytest.approx(
        4.782448137286847, abs=1e-9
    )
    assert corpus_counts.bytes_per_token(tok, flores_lines("est_Latn")) == pytest.approx(
        2.607062637942147, abs=1e-9
    )


# paper 001 Table 2: fertility of the original LLaMA-3.1 tokenizer on FLORES-200 (corpus-level tokens/words)
PAPER001_FERTILITY = {
    "eng_Latn": 1.24,
    "arb_Arab": 2.28,
    "kor_Hang": 2.61,
    "rus_Cyrl": 2.22,
    "ell_Grek": 2.54,
}


@pytest.mark.parametrize("lang", sorted(PAPER001_FERTILITY))
def test_llama31_fertility_paper001_table2(lang):
    s = mx.corpus_stats(load_shared("llama-3.1"), flores_lines(lang))
    assert abs(s["fertility"] - PAPER001_FERTILITY[lang]) <= 0.02, s["fertility"]
    assert s["fertility"] == s["tokens"] / s["words"]


def test_arabic_premium_paper001_table3():
    """Parity/premium vs English (Petrov et al.): LLaMA-3.1 1.67 and Qwen3 1.65 for Arabic on FLORES-200."""
    data = fl.open_flores(FLORES)
    rows = grid.compression_table(
        [load_shared("llama-3.1"), load_shared("qwen3")],
        data,
        ["arb_Arab", "eng_Latn"],
        names=["llama", "qwen"],
    )
    by = {(r["tokenizer"], r["lang"]): r for r in rows}
    assert round(by["llama", "arb_Arab"]["parity"], 2) == 1.67
    assert round(by["qwen", "arb_Arab"]["parity"], 2) == 1.65
    assert by["llama", "eng_Latn"]["parity"] == 1.0
    assert by["llama", "arb_Arab"]["parity_corpus"] == pytest.approx(
        by["llama", "arb_Arab"]["tokens"] / by["llama", "eng_Latn"]["tokens"]
    )


# ------------------------------------------------------------------------------------------ Rényi
A = "pick @@ed pick @@l @@ed pick @@les".split()
B = "pick @@e @@d pick @@l @@e @@d pick @@l @@e @@s".split()


def test_renyi_tokenization_scorer_vectors():
    assert renyi.renyi_efficiency(A, power=2.5) == pytest.approx(0.8265064834225245, abs=1e-12)
    assert renyi.renyi_entropy(A, power=2.5) == pytest.approx(1.653012966845049, abs=1e-12)
    assert renyi.renyi_efficiency(B, power=2.5) == pytest.approx(0.9204840242168808, abs=1e-12)
    assert renyi.renyi_entropy(B, power=2.5) == pytest.approx(2.1372977167241545, abs=1e-12)
    assert renyi.renyi_efficiency(A, power=1.0) == pytest.approx(0.9211854965885544, abs=1e-12)
    assert renyi.renyi_efficiency(B, power=1.0) == pytest.approx(0.9609557933859342, abs=1e-12)
    # the README's "2.5" example values are really power 3.0
    assert renyi.renyi_efficiency(A, power=3.0) == pytest.approx(0.8031, abs=1e-4)  # README prints 4 digits
    assert renyi.renyi_efficiency(B, power=3.0) == pytest.approx(0.9105, abs=1e-4)
    assert renyi.renyi_efficiency(A, power=3.0) == pytest.approx(
        math.log2(343 / 37) / 4
    )  # by hand: p = 3,2,1,1 / 7
    assert renyi.renyi_efficiency(A) == renyi.renyi_efficiency(A, power=2.5)  # our default is 2.5


def test_renyi_on_ids_matches_strings_and_vocab_modes():
    tok = load_shared("gpt2")
    lines = flores_lines("eng_Latn", 50)
    enc = tok.tokenizer.encode_batch(lines, add_special_tokens=False)
    ids = [i for e in enc for i in e.ids]
    toks = [t for e in enc for t in e.tokens]
    s = mx.corpus_stats(tok, lines)
    assert s["renyi_efficiency_observed"] == pytest.approx(renyi.renyi_efficiency(toks, 2.5))
    assert s["renyi_efficiency"] == pytest.approx(renyi.renyi_efficiency(ids, 2.5, vocab_size=tok.vocab_size))
    assert s["renyi_efficiency"] < s["renyi_efficiency_observed"]  # log2 |V| > log2 observed types
    s3 = mx.corpus_stats(tok, lines, power=3.0)
    assert s3["renyi_efficiency"] != s["renyi_efficiency"] and s3["power"] == 3.0


# ------------------------------------------------------------------------------------------ per-token metrics
@pytest.mark.parametrize(
    "name", ["gpt2", "llama-2", "llama-3.1", "qwen3", "bert-base-uncased", "pegasus-unigram", "gemma"]
)
def test_encode_ids_are_encode_batchs_ids_in_every_script(name):
    """The metrics encode with `encode_batch_fast` (no character offsets): the same ids as `encode_batch`, one
    line at a time, on every model type, normalizer and script (byte-level, SentencePiece with byte fallback,
    WordPiece, Unigram; Latin, Cyrillic, Arabic, Devanagari, Han, Thai, Ge'ez, emoji and combining marks)."""
    tok = load_shared(name)
    lines = [x for lang in ("eng_Latn", "rus_Cyrl", "arb_Arab", "hin_Deva", "zho_Hans", "tha_Thai", "amh_Ethi")
             for x in flores_lines(lang, 8)] + ["e\u0301 🧪 \t  tab", "  leading", "x" * 3000]  # fmt: skip
    flat, lens = corpus_counts.encode_ids(tok, lines)
    want = [tok.tokenizer.encode(x, add_special_tokens=False).ids for x in lines]
    assert lens.tolist() == [len(w) for w in want]
    assert flat.tolist() == [i for w in want for i in w]


def test_no_special_tokens_and_counts():
    tok = load_shared("llama-2")  # its post-processor adds <s>
    lines = flores_lines("deu_Latn", 30)
    s = mx.corpus_stats(tok, lines)
    assert s["tokens"] == sum(len(tok.tokenizer.encode(x, add_special_tokens=False).ids) for x in lines)
    assert s["tokens"] < sum(len(tok.tokenizer.encode(x).ids) for x in lines)
    assert s["bytes"] == sum(len(x.encode()) for x in lines) and s["chars"] == sum(map(len, lines))
    assert s["words"] == sum(len(x.split()) for x in lines)
    assert s["tokens_per_sentence"] == s["tokens"] / 30


def test_byte_fallback_unk_and_spaceless():
    zh = flores_lines("zho_Hans", 100)
    en = flores_lines("eng_Latn", 100)
    l2 = load_shared("llama-2")
    assert mx.corpus_stats(l2, zh)["byte_fallback_rate"] > 0.3  # many Han characters are <0xNN> pieces
    assert mx.corpus_stats(l2, en)["byte_fallback_rate"] == 0.0
    bert = load_shared("bert-base-uncased")
    assert mx.corpus_stats(bert, zh)["unk_rate"] > 0.3 and mx.corpus_stats(bert, en)["unk_rate"] == 0.0
    llama3 = load_shared("llama-3.1")
    s = mx.corpus_stats(llama3, zh)
    assert s["spaceless"] and s["partial_char_rate"] > 0 and s["tokens_per_char"] == s["tokens"] / s["chars"]
    assert mx.corpus_stats(llama3, en)["byte_fallback_rate"] == 0.0  # ASCII single bytes are not fallback


def test_continued_words_on_a_known_sentence():
    tok = load_shared("llama-3.1")
    text = "Hello world unbelievablyqwertyuiop"
    enc = tok.tokenizer.encode(text, add_special_tokens=False)
    assert enc.tokens[:2] == ["Hello", "Ġworld"] and len(enc.tokens) > 3
    s = mx.corpus_stats(tok, [text, "Hello  world"])
    # words: Hello, world, unbelievably… (continued), Hello, world (double space: a lone "Ġ" token)
    assert s["continued_words"] == pytest.approx(1 / 5)
    sp = mx.corpus_stats(load_shared("llama-2"), [text])
    assert sp["continued_words"] == pytest.approx(1 / 3)
    # punctuation-only tokens are words of their own (UD-style): "(Hello)" is 3 one-token words
    p = mx.corpus_stats(tok, ["Hello (world)."])
    assert [t for t in tok.tokenizer.encode("Hello (world).", add_special_tokens=False).tokens] == [
        "Hello", "Ġ(", "world", ")."
    ]  # fmt: skip
    assert p["continued_words"] == 0.0


def test_continued_words_arabic_close_to_paper001_table3():
    """Paper 001 Table 3 reports PCW_Ar 0.55 (LLaMA-3.1) / 0.50 (Qwen) on UD PADT; FLORES Arabic is close."""
    llama = mx.corpus_stats(load_shared("llama-3.1"), flores_lines("arb_Arab"))["continued_words"]
    qwen = mx.corpus_stats(load_shared("qwen3"), flores_lines("arb_Arab"))["continued_words"]
    assert abs(llama - 0.55) < 0.05 and abs(qwen - 0.50) < 0.05 and qwen < llama


def test_dropout_is_switched_off():
    base = load_shared("gpt2")
    doc = base.document()
    doc["model"]["dropout"] = 0.5
    tok = LoadedTokenizer.from_document(doc, name="gpt2-dropout")
    lines = flores_lines("eng_Latn", 20)
    assert corpus_counts.bytes_per_token(tok, lines) == corpus_counts.bytes_per_token(base, lines)
    assert tok.dropout == 0.5  # the LoadedTokenizer itself is untouched


def test_empty_input_is_a_clear_error():
    with pytest.raises(DataError, match="no non-empty lines"):
        mx.corpus_stats(load_shared("gpt2"), ["", ""])


# ------------------------------------------------------------------------------------------ across languages
def test_gini():
    assert summaries.gini([2, 2, 2, 2]) == pytest.approx(0.0)
    assert summaries.gini([0, 0, 0, 1]) == pytest.approx(0.75)
    assert summaries.gini([1, 2, 3, None, float("nan")]) == pytest.approx(summaries.gini([1, 2, 3]))
    x = np.random.default_rng(0).random(50)
    brute = np.abs(x[:, None] - x[None, :]).sum() / (2 * len(x) ** 2 * x.mean())
    assert summaries.gini(x) == pytest.approx(brute)


def _rows():
    vals = {"eng_Latn": (4.0, 5.0), "rus_Cyrl": (3.0, 3.3), "zho_Hans": (2.0, 1.9), "jpn_Jpan": (2.5, 2.5)}
    rows = []
    for lang, (a, b) in vals.items():
        script = lang.split("_")[1]
        rows.append(
            {"tokenizer": "naive", "lang": lang, "script": script, "bytes_per_token": a, "fertility": a}
        )
        rows.append(
            {"tokenizer": "ours", "lang": lang, "script": script, "bytes_per_token": b, "fertility": b}
        )
    return rows


def test_compare_delta_rel_and_win_rate():
    c = summaries.compare(_rows(), "ours", "naive", "bytes_per_token")
    assert c["languages"] == 4
    assert c["delta_rel"] == pytest.approx(np.mean([5 / 4 - 1, 3.3 / 3 - 1, 1.9 / 2 - 1, 0]))
    assert c["win_rate"] == pytest.approx(0.5)  # eng, rus win; zho loses; jpn ties (not a win)
    f = summaries.compare(_rows(), "ours", "naive", "fertility")  # lower is better
    assert f["win_rate"] == pytest.approx(0.25)
    groups = {g["script"]: g for g in summaries.script_compare(_rows(), "ours", "naive")}
    assert set(groups) == {"Latn", "Cyrl", "Jpan", "Hani"} and groups["Hani"]["n"] == 1
    assert groups["Latn"]["delta_rel"] == pytest.approx(0.25)


def test_summaries():
    s = {r["tokenizer"]: r for r in summaries.summarize(_rows())}
    assert s["naive"]["mean"] == pytest.approx(2.875) and s["naive"]["languages"] == 4
    ss = summaries.script_summary(_rows() + [{"tokenizer": "ours", "lang": "tha_Thai", "script": "Thai",
                                       "bytes_per_token": 6.0}])  # fmt: skip
    assert [r["script"] for r in ss if r["tokenizer"] == "ours"] == ["Latn", "Cyrl", "Jpan", "Hani", "Other"]
    assert summaries.script_group("Hant") == "Hani" and summaries.script_group("Deva") == "Other"
    assert summaries.script_group("Deva", table2=False) == "Deva"


def test_latex_escapes():
    tex = summaries.to_latex(
        [{"lang": "eng_Latn", "x": 1.23456, "y": None}], ["lang", "x", "y"], caption="50% & more"
    )
    assert r"eng\_Latn & 1.235 & -- \\" in tex and r"50\% \& more" in tex and "\\toprule" in tex


# ------------------------------------------------------------------------------------------ table, cache, CLI
def test_compression_table_cache_memory_and_disk(tmp_path):
    data = fl.open_flores(FLORES)
    tok = load_shared("gpt2")
    rows = grid.compression_table([tok], data, "eng_Latn,ekk_Latn")
    assert [r["lang"] for r in rows] == ["eng_Latn", "est_Latn"]
    assert rows[1]["family"] == "Uralic" and rows[1]["name"] == "Estonian"
    stats, cached = grid.language_stats(tok, data, "est_Latn")
    assert cached
    files = list((tmp_path / "cache" / "store" / "compression").glob(f"{tok.content_hash}-*.json"))
    assert len(files) == 1
    on_disk = json.loads(files[0].read_text())["data"]
    assert any(k.startswith(f"{tok.content_hash}|est_Latn|{data.data_hash('est_Latn')}|") for k in on_disk)
    grid.clear_cache()  # memory only: the disk copy answers
    _, cached = grid.language_stats(tok, data, "est_Latn")
    assert cached
    again = grid.compression_table([tok], data, "eng_Latn,est_Latn")
    assert again == rows
    _, cached = grid.language_stats(tok, data, "est_Latn", power=3.0)  # other parameters: other key
    assert not cached
    for r in rows:
        json.dumps(r, allow_nan=False)  # valid JSON (no NaN)


def test_processes_on_one_cache_see_and_keep_each_others_languages(tmp_path, monkeypatch):
    """A long-running process (a server) that has read a tokenizer's stored results sees the languages another
    process (a CLI run) computed since, instead of computing them again, and its next save keeps them: it reads
    the document again when its stamp changes and merges under the store's lock when it writes. Before, a process
    read the document once in its life and wrote back only its own view, dropping the other's languages."""
    data = fl.open_flores(FLORES)
    tok = load_shared("gpt2")
    grid.compression_table([tok], data, "eng_Latn")  # this process reads and writes the document

    def other_process(langs: str) -> None:
        cmd = [sys.executable, "-m", "analysis", "compress", "--tokenizer", str(tok.source), "--langs", langs,
               "--json", "--quiet"]  # fmt: skip
        done = subprocess.run(
            cmd, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-2000:]

    def computed_again(*args, **kwargs):
        pytest.fail("a stored language was computed again")

    other_process("est_Latn")
    with monkeypatch.context() as m:  # the sweep reads what the other process stored: it computes nothing
        m.setattr(grid, "_compute_language", computed_again)
        rows = grid.compression_table([tok], data, "eng_Latn,est_Latn")
    assert rows[1]["lang"] == "est_Latn" and rows[1]["sentences"] == len(data.lines("est_Latn"))

    grid.language_stats(tok, data, "arb_Arab")  # computed here, not saved yet …
    other_process("fin_Latn")  # … while another process saves Finnish
    grid._save_disk(tok.content_hash, renyi.DEFAULT_POWER)
    (doc,) = (tmp_path / "cache" / "store" / "compression").glob(f"{tok.content_hash}-*.json")
    langs = {k.split("|")[1] for k in json.loads(doc.read_text())["data"]}
    assert langs == {"eng_Latn", "est_Latn", "arb_Arab", "fin_Latn"}
    assert grid.language_stats(tok, data, "fin_Latn")[1]  # and this process holds Finnish now too


def test_cli_json_and_csv(tmp_path, capsys):
    out_csv = tmp_path / "rows.csv"
    rc = main(["compress", "--tokenizer", str(load_shared("llama-3.1").source or ""), "--langs", "eng_Latn,est_Latn",
               "--flores", str(FLORES), "--json", "--csv", str(out_csv)])  # fmt: skip
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["lang"] for r in rows] == ["eng_Latn", "est_Latn"]
    for key in ("tokenizer", "lang", "bytes_per_token", "chars_per_token", "fertility", "parity",
                "renyi_efficiency", "tokens"):  # fmt: skip
        assert key in rows[0]
    assert round(rows[0]["bytes_per_token"], 3) == 4.862 and rows[0]["parity"] == 1.0
    lines = out_csv.read_text().splitlines()
    assert lines[0].startswith("tokenizer,lang,") and len(lines) == 3
    rc = main(
        [
            "compress",
            "--tokenizer",
            str(load_shared("gpt2").source),
            "--langs",
            "xxx_Yyyy",
            "--flores",
            str(FLORES),
        ]
    )
    assert rc == 2 and "not in the FLORES data" in capsys.readouterr().err


def test_worst_sentences_are_sorted():
    tok = load_shared("gpt2")
    lines = flores_lines("ell_Grek", 60)
    worst = summaries.worst_sentences(tok, lines, 5)
    assert len(worst) == 5
    bpts = [w["bytes_per_token"] for w in worst]
    assert bpts == sorted(bpts)
    all_bpt = [len(x.encode()) / len(tok.tokenizer.encode(x, add_special_tokens=False).ids) for x in lines]
    assert math.isclose(bpts[0], min(all_bpt))
    assert len(worst[0]["ids"]) == worst[0]["tokens"] == len(worst[0]["offsets"]) == len(worst[0]["pieces"])
