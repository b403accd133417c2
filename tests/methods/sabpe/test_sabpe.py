"""Source-attributed BPE (analysis.methods.sabpe), and its CLI, on a slice of the shared code corpus (the page:
tests/app/test_sabpe_page.py)."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import tokenizers
from support import ASSETS, load_shared

from analysis.bpe import BPEReplay, unreachable_ids
from analysis.bpe.training import train_merges
from analysis.cli import main
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.measure.summaries import gini
from analysis.methods import sabpe
from analysis.texts import code

CODE = ASSETS / "corpora" / "code"
LANGS = ["python", "go", "ruby", "lua"]
SLICE = {"max_files_per_repo": 1, "max_bytes_per_repo": 10_000}


@pytest.fixture(scope="module")
def base():
    return load_shared("gpt2")


@pytest.fixture(scope="module")
def words(base):
    return sabpe.collect_words(base, code.read_code(CODE, languages=LANGS, **SLICE))


@pytest.fixture(scope="module")
def heldout():
    return [r.text for r in code.read_code(CODE, languages=LANGS, heldout=True, max_files_per_repo=3)]


def _merges(folder) -> list:
    return json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["merges"]


@pytest.mark.slow
def test_cli_local_executor_writes_the_merges_of_the_in_process_run(tmp_path):
    glob = str(CODE / "*.jsonl.gz")
    common = ["sabpe", "--corpus", glob, "--languages", "lua,ruby,go", "--max-files-per-repo", "2",
              "--vocab-size", "700", "--no-baseline", "--json"]  # fmt: skip
    assert main([*common, "--out", str(tmp_path / "a")]) == 0
    assert main([*common, "--out", str(tmp_path / "b"), "--executor", "local", "--tasks", "8", "--workers", "2",
                 "--workdir", str(tmp_path / "wd")]) == 0  # fmt: skip
    assert _merges(tmp_path / "a") == _merges(tmp_path / "b")
    recs = code.read_code(CODE, languages=["lua", "ruby", "go"], max_files_per_repo=2)
    ref = sabpe.train(load_shared("gpt2"), recs, 700)
    assert _merges(tmp_path / "a") == [list(m) for m in ref.merges]


@pytest.fixture(scope="module")
def pair(base, words):
    plain = sabpe.train(base, words, 1000, priority="F", name="BPE")
    sa = sabpe.train(base, words, 1000, priority="F*log(R)*L", name="SA-BPE")
    return plain, sa


def test_records_carry_repository_and_language():
    recs = code.read_code(CODE, languages=["go", "tcl"], max_files_per_repo=1)
    assert {r.language for r in recs} == {"go", "tcl"}
    assert all("/" in r.repo for r in recs)  # registry/package
    assert len({r.repo for r in recs}) == len(
        {(r.repo, r.language) for r in recs}
    )  # one file per repo+language
    held = {r.repo for r in code.read_code(CODE, languages=["go"], heldout=True)}
    assert held and not held & {r.repo for r in recs}  # held-out repositories never in train
    assert "python" in code.code_languages() and "scala" not in code.code_languages(heldout=True)


def test_priority_names_and_functions():
    assert sabpe.normalize_priority("F * log R * L") == "F*log(R)*L"
    assert sabpe.normalize_priority("f*log(r+1)") == "F*log(R+1)"
    with pytest.raises(DataError):
        sabpe.normalize_priority("F*R^2")
    f = sabpe.priority_function("F*log(R)")
    assert f(100, 1, 3) == 0.0 and math.isclose(f(100, 4, 3), 100 * math.log(4))
    assert sabpe.priority_function("F*L")(7, 9, 3) == 21


def test_priority_f_equals_plain_incremental_bpe(words):
    n = 500
    st = sabpe.train_source_bpe(words, n, priority="F")
    alphabet = set(sabpe.ALPHABET)
    plain = train_merges(words.counter(), n, lambda s: s in alphabet)
    assert len(st.merges) >= n
    assert st.merges == [s.pair for s in plain]
    assert [h.freq for h in st.history] == [s.freq for s in plain]


def test_skip_thresholds_are_respected(words):
    rule = sabpe.SkipRule(min_repos=3, min_languages=2, max_share=0.8)
    st = sabpe.train_source_bpe(words, 400, priority="F*log(R+1)", skip=rule)
    merged = [h for h in st.history if not h.skipped]
    skipped = [h for h in st.history if h.skipped]
    assert len({h.token for h in merged if h.new}) == 400
    assert skipped, "this corpus has pairs that violate the thresholds"
    for h in merged:
        assert h.repos >= 3 and h.languages >= 2 and h.top_share <= 0.8
    for h in skipped:
        assert h.repos < 3 or h.languages < 2 or h.top_share > 0.8
        assert (h.left, h.right) not in set(st.merges)


def _brute(words: list[tuple[str, str, str, int]], merges: list[tuple[str, str]]):
    """Apply merges to every word from scratch and count every pair's F, repositories and languages."""
    out: dict[tuple[str, str], list] = {}
    for w, repo, lang, c in words:
        seq = list(w)
        for a, b in merges:
            i, nxt = 0, []
            while i < len(seq):
                if i + 1 < len(seq) and seq[i] == a and seq[i + 1] == b:
                    nxt.append(a + b)
                    i += 2
                else:
                    nxt.append(seq[i])
                    i += 1
            seq = nxt
        for p in zip(seq, seq[1:]):
            e = out.setdefault(p, [0, set(), set()])
            e[0] += c
            e[1].add(repo)
            e[2].add(lang)
    return out


def test_source_counters_equal_brute_force_recount(base):
    recs = [
        code.CodeRecord("r1", "python", "a.py", "def foo_bar(): return foo_bar(x) + aaaa\n" * 3),
        code.CodeRecord("r2", "python", "b.py", "def foo(): pass  # aaaaaa bar bar\n"),
        code.CodeRecord("r3", "go", "c.go", "func foo_bar() { return bar + aaa }\n" * 2),
        code.CodeRecord("r3", "python", "d.py", "foo = bar_baz(foo)\n"),
        code.CodeRecord("r4", "lua", "e.lua", "local foo = baz(bar) -- aaaaaaa\n"),
    ]
    sw = sabpe.collect_words(base, recs)
    # the words per (repo, language), rebuilt independently with the Rust pre-tokenizer
    flat = []
    for rec in recs:
        for w, c in Counter(p for p, _ in base.tokenizer.pre_tokenizer.pre_tokenize_str(rec.text)).items():
            flat.append((w, rec.repo, rec.language, c))
    st = sabpe.train_source_bpe(
        sw, 40, priority="F*log(R+1)*L", skip=sabpe.SkipRule(min_repos=2), alphabet=sabpe.ALPHABET
    )
    assert len(st.history) > 20 and any(h.skipped for h in st.history)
    done: list[tuple[str, str]] = []
    for h in st.history:
        stats = _brute(flat, done)[(h.left, h.right)]
        assert (h.freq, h.repos, h.languages) == (stats[0], len(stats[1]), len(stats[2])), h
        # the chosen entry is the best one by (priority, F) among the pairs not skipped before it
        banned = {(x.left, x.right) for x in st.history if x.skipped and x.step < h.step}
        prio = sabpe.priority_function("F*log(R+1)*L")
        best = max(
            (prio(f, len(r), len(g)), f) for p, (f, r, g) in _brute(flat, done).items() if p not in banned
        )
        assert math.isclose(best[0], h.priority) and best[1] == h.freq
        if not h.skipped:
            done.append((h.left, h.right))


@pytest.mark.slow
def test_tokenizer_json_loads_and_encodes_like_our_replay(pair, heldout):
    plain, sa = pair
    for res in pair:
        tok = res.tokenizer
        doc = tok.document()
        assert doc["model"]["type"] == "BPE" and len(doc["model"]["merges"]) == len(res.merges)
        assert tok.vocab_size == 1000
        rust = tokenizers.Tokenizer.from_str(json.dumps(doc))
        replay = BPEReplay(tok)
        for text in heldout[:6]:
            text = text[:6000]
            ids = rust.encode(text, add_special_tokens=False).ids
            assert ids == replay.tokenize_ids(text)
            assert rust.decode(ids) == text
        assert unreachable_ids(tok) == set()
    assert plain.merges != sa.merges


def test_training_segmentation_matches_inference(base, words):
    st = sabpe.train_source_bpe(words, 500, priority="F*log(R)", skip=sabpe.SkipRule(max_share=0.95))
    model = sabpe.build_tokenizer(base, st.merges).fresh_tokenizer().model
    for seq, wi in list(zip(st.seqs, st.word_index))[::50]:
        assert [t.value for t in model.tokenize(words.words[wi])] == [st.symbols[s] for s in seq]


@pytest.mark.slow
def test_sabpe_lowers_single_repository_tokens(pair, heldout):
    plain, sa = pair
    mp, ms = sabpe.evaluate(plain, heldout), sabpe.evaluate(sa, heldout)
    assert ms["single_repo_share"] < mp["single_repo_share"]
    assert ms["single_repo_merges"] < mp["single_repo_merges"]
    assert mp["stt_unreachable"] == ms["stt_unreachable"] == 0
    for m in (mp, ms):
        assert 1.5 < m["bytes_per_token"] < 6 and 0 < m["token_frequency_gini"] < 1 and m["coverage"] > 500
    top = plain.concentrated(5)
    assert top and all(r["top_share"] >= 0.9 for r in top)


def test_name_parts_and_three_digit_numbers():
    cases = {"getHTTPStatus": 3, "snake_case_name": 3, "_HandRankName": 3, " fooBar": 2, "XMLHttpRequest": 3,
             "hello": 0, "HTTP": 0, "abc123": 0, "a_b": 2, "foo-bar": 0, "__init__": 0}  # fmt: skip
    assert {k: sabpe.name_parts(k) for k in cases} == cases
    assert (
        sabpe.three_digit_numbers(load_shared("llama-3.1")) == sabpe.THREE_DIGIT_MAX
    )  # digits in groups of 3
    assert 0 < sabpe.three_digit_numbers(load_shared("gpt2")) < sabpe.THREE_DIGIT_MAX
    ids = sabpe.identifier_lengths(load_shared("gpt2"))
    assert ids["tokens"] == sum(ids["by_parts"].values()) > 0 and ids["max_parts"] >= 2


@pytest.mark.slow
def test_per_language_compression_and_its_gini(pair, base, words):
    held = code.read_code(CODE, languages=LANGS, heldout=True, max_files_per_repo=3)
    plain, sa = pair
    m = sabpe.evaluate(plain, held)
    per = m["languages"]
    assert set(per) == set(LANGS) and sum(v["tokens"] for v in per.values()) == m["heldout_tokens"]
    assert m["language_compression_gini"] == gini([v["bytes_per_token"] for v in per.values()])
    assert m["language_compression_gini"] != m["token_frequency_gini"]  # two Gini indices, named apart
    parity, _ = sabpe.train_parity_baseline(
        base, sabpe.records_by_language(code.read_code(CODE, languages=LANGS, **SLICE)), 1000
    )
    assert parity.vocab_size == 1000
    cmp = sabpe.SabpeComparison([str(CODE)], words, {"bpe": plain, "sabpe": sa}, held, parity=parity)
    doc = cmp.to_json()
    table = doc["language_compression"]
    assert [r["language"] for r in table["rows"]] == sorted(LANGS)
    assert set(table["gini"]) == {"bpe", "sabpe", "parity"} and table["paper"][0]["gini"] == 0.0576
    assert table["gini"]["bpe"] == m["language_compression_gini"]
    # the parity-aware baseline (equal target compression per language) evens out the per-language compression
    assert table["gini"]["parity"] < table["gini"]["bpe"]
    assert doc["sabpe"]["metrics"]["three_digit_numbers"] >= 0 and "identifiers" in doc["bpe"]["metrics"]
    with pytest.raises(DataError, match="at least two"):
        sabpe.train_parity_baseline(base, {"lua": ["x = 1"]}, 600)


def test_errors(base, words):
    with pytest.raises(UnsupportedTokenizerError):
        sabpe.collect_words(load_shared("llama-2"), [code.CodeRecord("r", "c", "", "int x;")])
    with pytest.raises(DataError):
        sabpe.train(base, words, 200)
    with pytest.raises(DataError):
        code.read_code(CODE, languages=["cobol"])


@pytest.mark.slow
def test_cli_json(capsys, tmp_path):
    rc = main(
        [
            "sabpe",
            "--corpus",
            str(CODE),
            "--languages",
            "lua,ruby",
            "--max-files-per-repo",
            "2",
            "--vocab-size",
            "600",
            "--priority",
            "F*log(R+1)",
            "--min-sources",
            "2",
            "--max-share",
            "0.9",
            "--out",
            str(tmp_path / "tok"),
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sabpe"]["priority"] == "F*log(R+1)" and out["sabpe"]["skipped"] > 0
    assert out["bpe"]["priority"] == "F" and out["bpe"]["skipped"] == 0
    assert out["sabpe"]["metrics"]["single_repo_share"] <= out["bpe"]["metrics"]["single_repo_share"]
    tok = tokenizers.Tokenizer.from_file(str(tmp_path / "tok" / "tokenizer.json"))
    assert tok.get_vocab_size() == 600
    assert (tmp_path / "tok" / "history.csv").read_text().startswith("step,left,right")
    report = json.loads((tmp_path / "tok" / "sabpe_report.json").read_text(encoding="utf-8"))
    assert report == out  # the report written is the document printed
    assert out["counting"]["executor"] == "inprocess" and out["language_compression"]["rows"]
    rob = out["robustness"]  # plain BPE → SA-BPE per held-out language
    assert [r["lang"] for r in rob["languages"]] == ["lua", "ruby"] and rob["languages"][0]["words"] > 0
    assert main(["sabpe", "--vocab-size", "600", "--priority", "nope"]) == 2
