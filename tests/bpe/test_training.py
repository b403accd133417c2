"""Continued BPE training (analysis.bpe.training) and training-text sources (analysis.texts.corpora)."""

from __future__ import annotations

import gzip
import io
import json
import random
import zipfile
from collections import Counter

import pytest
from support import ASSETS, BPE_TOKENIZERS, flores_lines, load_shared
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from analysis.bpe import unreachable_ids
from analysis.bpe.trainer import FrequencyStats, learn
from analysis.bpe.training import (
    continue_training,
    missing_characters,
    sp_piece_valid,
    train_merges,
    training_mode,
)
from analysis.bpe.words import PretokenCounter, _chunk_pretokenizer, added_token_splitter, count_pretokens
from analysis.core.unicode import sentencepiece_script as char_script
from analysis.errors import DataError, UnsupportedTokenizerError
from analysis.methods.extension import append_to_model
from analysis.texts import flores
from analysis.texts.corpora import Corpus, Source, corpus, from_paths, iter_bytes, shared_corpora, with_budget
from analysis.texts.flores import split_lines as flores_split
from analysis.tokenizer.document import parse_merges

EST_TRAIN = flores_lines("est_Latn")[:300]


# ---------------------------------------------------------------------------------------------- corpora
def test_flores_split_is_train_then_heldout():
    train, held = flores_split("est_Latn")
    assert len(train) == 800 and len(held) == 212
    assert train + held == flores_lines("est_Latn")


def test_unknown_flores_language_is_a_data_error():
    with pytest.raises(DataError, match="unknown FLORES"):
        flores_split("xxx_Latn")


def test_budget_cuts_and_corpus_reiterates(tmp_path):
    f = tmp_path / "a.txt.gz"
    with gzip.open(f, "wt", encoding="utf-8") as fh:
        fh.write("tere maailm\n\nhello world\nthird line\n")
    c = from_paths([f], max_chars=15)
    assert list(c) == ["tere maailm", "hell"]
    assert list(c) == list(c)  # re-iterable
    assert list(with_budget(iter(["abc", "def"]), None)) == ["abc", "def"]
    assert c.fingerprint != from_paths([f], max_chars=16).fingerprint


def test_zip_jsonl_and_folder_sources(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("x/one.txt", "line one\nline two\n")
        zf.writestr("x/two.jsonl", json.dumps({"text": "doc\nwith newline"}) + "\n")
        zf.writestr("x/image.png", b"\x89PNG")
    units = list(iter_bytes("up.zip", buf.getvalue()))
    assert units == ["line one", "line two", "doc\nwith newline"]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    assert list(from_paths([tmp_path / "d"])) == ["alpha", "beta"]
    with pytest.raises(DataError, match="no text files"):
        buf2 = io.BytesIO()
        with zipfile.ZipFile(buf2, "w") as zf:
            zf.writestr("a.png", b"x")
        list(iter_bytes("b.zip", buf2.getvalue()))


def test_shared_corpora_are_listed_and_streamed():
    sc = shared_corpora()
    assert "text/est_Latn.txt.gz" in sc and "code/python.jsonl.gz" in sc
    first = next(iter(Source("file", str(sc["code/python.jsonl.gz"])).units()))
    assert isinstance(first, str) and len(first) > 0


def test_empty_corpus_raises_data_error(tmp_path):
    tok = load_shared("gpt2")
    with pytest.raises(DataError, match="empty"):
        continue_training(tok, ["", "   "], 10)
    with pytest.raises(DataError):
        continue_training(tok, Corpus((Source("lines", "empty", ()),)), 10)


# ---------------------------------------------------------------------------------------------- SP rules
def test_sentencepiece_validity_rules():
    assert sp_piece_valid("▁tere")
    assert sp_piece_valid("▁▁▁")  # whitespace-only pieces allowed
    assert not sp_piece_valid("tere▁")  # ▁ only at position 0
    assert not sp_piece_valid("▁▁a")
    assert not sp_piece_valid("a1")  # split_digits: no digit in a merged piece
    assert sp_piece_valid("7")
    assert not sp_piece_valid("a,")  # Latin + Common
    assert not sp_piece_valid("aб")  # Latin + Cyrillic
    assert sp_piece_valid("東京")
    assert sp_piece_valid("ひら")  # Hiragana counts as Han
    assert sp_piece_valid("漢ひ")
    assert sp_piece_valid("é")
    assert sp_piece_valid("e\u0301")  # combining mark inherits the previous script
    assert not sp_piece_valid("a" * 17)


def test_char_script():
    assert char_script("a") == "Latin" and char_script("Ж") == "Cyrillic" and char_script("ق") == "Arabic"
    assert char_script("क") == "Devanagari" and char_script("한") == "Hangul" and char_script("カ") == "Han"
    assert (
        char_script(",") == "Common" and char_script("1") == "Common" and char_script("\u0301") == "Inherited"
    )


# ---------------------------------------------------------------------------------------------- trainer
def test_trainer_counts_ties_and_max_length():
    words = Counter({("a", "b", "c"): 5, ("b", "c"): 2, ("x", "y"): 7, ("a", "b"): 2})
    steps = train_merges(words, 10, known=lambda s: False)
    # (b,c) 7 vs (x,y) 7 vs (a,b) 7: tie → lexicographically smallest pair first
    assert [s.pair for s in steps[:3]] == [("a", "b"), ("x", "y"), ("ab", "c")]
    assert [s.freq for s in steps[:3]] == [7, 7, 5]
    # after ab: remaining (ab,c)=5, (b,c)=2
    assert steps[3].pair == ("b", "c") and steps[3].freq == 2
    short = train_merges(words, 10, known=lambda s: False, max_token_length=2)
    assert all(len(s.token) <= 2 for s in short)
    again = train_merges(words, 10, known=lambda s: False)
    assert again == steps  # deterministic


def test_trainer_overlapping_pairs_and_known_tokens():
    steps = train_merges(Counter({("a", "a", "a", "a"): 1}), 5, known=lambda s: s == "aa")
    assert steps[0].pair == ("a", "a") and not steps[0].new  # 'aa' already known: merge kept, not counted
    assert steps[1].pair == ("aa", "aa") and steps[1].new and steps[1].freq == 1


def test_one_run_yields_every_prefix():
    tok = load_shared("gpt2")
    big = continue_training(tok, EST_TRAIN, 60)
    small = continue_training(tok, EST_TRAIN, 25)
    assert big.n_new == 60 and small.n_new == 25
    assert big.new_tokens(25) == small.new_tokens()
    assert big.merges(25) == small.merges()
    assert len(big.new_tokens(7)) == 7


def test_byte_level_words_use_current_segmentation():
    tok = load_shared("llama-3.1")
    assert training_mode(tok) == "byte-level"
    res = continue_training(tok, EST_TRAIN[:100], 30)
    for s in res.steps:
        a, b = s.pair
        assert s.token == a + b
    # every new token is new; the merges' parts exist in base or earlier steps
    known = set(tok.vocab)
    for s in res.steps:
        assert s.pair[0] in known and s.pair[1] in known
        known.add(s.token)


#: whitespace runs, tabs, line breaks, no-break spaces, contractions, digits, marks, other scripts, added tokens
TRICKY = ["  leading", "trailing  ", "a  b   c", "tab\there", "x \ny", "a\r\nb", "nbsp\u00a0word", "\u00a0 lead",
          " it's 'S 'LL", "12345 678", "東京 tōkyō", "e\u0301 combining", "emoji 😀 x", "a\u2003b", "word,  word.",
          "ǅungla Ǆ", "ʰmod ˆx", "x <|endoftext|> y", "Tere hommikust! Kuidas läheb?",
          # a word then ASCII punctuation (one rule), and what the rule must leave to the pre-tokenizer
          'end). "Quote," he said.', "it's. dogs'. rock'n'roll", "x,y a.b.c 3.14 €5 10%", "Ærø?! ǅ. Ŀ;",
          "naïve… cafés—", "a ,b  . c", "x == y -> z += 1 ', '", "a '. ' b", "trailing. ", "word-\tnext", "«guillemets» ¿qué?"]  # fmt: skip


@pytest.mark.parametrize("name", ["gpt2", "llama-3.1", "qwen3", "smollm2-135m-instruct"])
def test_pretokens_counted_by_piece_equal_the_pre_tokenizer_per_unit(name):
    tok = load_shared(name)
    assert _chunk_pretokenizer(tok) is not None  # the fast path is taken for these pre-tokenizers
    units = TRICKY + flores_lines("est_Latn")[:100]
    for code in (
        "kor_Hang",
        "hin_Deva",
        "rus_Cyrl",
        "zho_Hans",
        "jpn_Jpan",
        "arb_Arab",
        "ell_Grek",
        "tha_Thai",
    ):
        units += flores_lines(code)[
            :30
        ]  # letters of other scripts: the old-letter rule and the pre-tokenizer
    split, norm, pre = added_token_splitter(tok), tok.tokenizer.normalizer, tok.tokenizer.pre_tokenizer
    ref: Counter = Counter()
    for unit in units:
        for part in split(unit):
            part = norm.normalize_str(part) if norm is not None else part
            ref.update(p for p, _ in pre.pre_tokenize_str(part))
    assert count_pretokens(tok, units)[0] == ref


@pytest.mark.parametrize("name", ["gpt2", "llama-3.1"])
def test_pretoken_counter_over_batches_equals_one_call(name):
    tok = load_shared(name)
    units = TRICKY + flores_lines("est_Latn")[:200] + flores_lines("vie_Latn")[:50]
    counter = PretokenCounter(tok)
    for i in range(0, len(units), 37):
        counter.add(units[i : i + 37])
    assert counter.size > 0
    got = counter.take()
    ref, n_units, n_chars = count_pretokens(tok, units)
    assert got == ref and all(n > 0 for n in got.values())
    assert (counter.units, counter.chars) == (n_units, n_chars)
    assert counter.size == 0 and counter.take() == Counter()  # taking empties it


def test_pretokens_by_piece_only_for_space_safe_pre_tokenizers():
    assert _chunk_pretokenizer(load_shared("mistral-nemo")) is None  # another Split pattern: per unit


def test_wordpiece_is_not_supported_by_continued_training():
    with pytest.raises(UnsupportedTokenizerError, match="WordPiece"):
        continue_training(load_shared("bert-base-uncased"), EST_TRAIN, 10)


def test_sentencepiece_merges_follow_sp_rules():
    tok = load_shared("llama-2")
    assert training_mode(tok) == "sentencepiece"
    res = continue_training(tok, EST_TRAIN, 80)
    assert res.n_new == 80
    for s in res.steps:
        if s.pair is not None:
            assert sp_piece_valid(s.token), s.token


def test_sentencepiece_coverage_adds_missing_characters_first():
    tok = load_shared("llama-2")
    kor = flores_lines("kor_Hang")[:150]
    missing = missing_characters(tok, kor)
    assert missing, "Llama-2 lacks many Hangul syllables"
    res = continue_training(tok, kor, 120)
    chars = res.char_steps
    assert chars and res.steps[: len(chars)] == chars  # characters come first
    assert [s.token for s in chars] == [c for c, _ in missing][: len(chars)]
    counts = [s.freq for s in chars]
    assert counts == sorted(counts, reverse=True)
    ext = append_to_model(tok, res.new_tokens(), res.merges(), "continued")
    assert not (unreachable_ids(ext.tokenizer) & set(ext.added_ids))
    # the added characters replace byte-fallback pieces
    before = tok.tokenizer.encode(kor[0], add_special_tokens=False).tokens
    after = ext.tokenizer.tokenizer.encode(kor[0], add_special_tokens=False).tokens
    assert sum(t.startswith("<0x") for t in after) < sum(t.startswith("<0x") for t in before)


# ---------------------------------------------------------------------------------------------- STT = 0
_SLOW = {"llama-3.1", "qwen3", "mistral-nemo", "gemma"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n for n in BPE_TOKENIZERS]
)
def test_continued_training_adds_no_unreachable_tokens(name):
    tok = load_shared(name)
    res = continue_training(tok, EST_TRAIN[:150] + flores_lines("fin_Latn")[:50], 60)
    assert res.n_new == 60
    ext = append_to_model(tok, res.new_tokens(), res.merges(), "continued")
    assert ext.n_added == 60
    bad = unreachable_ids(ext.tokenizer) & set(ext.added_ids)
    assert not bad, [ext.tokenizer.id_to_token[i] for i in bad]


def test_assets_root_exists():
    assert (ASSETS / "corpora" / "text" / "est_Latn.txt.gz").is_file()
    c = corpus(Source("flores-train", "est_Latn:10"))
    assert len(list(c)) == 10 and "training lines 1–10" in c.label


def _naive_bpe(words: Counter, n: int) -> list[tuple[tuple[str, str], int]]:
    """Reference: recount every pair after every merge (slow, obviously right)."""
    words = Counter({w: f for w, f in words.items() if len(w) > 1})
    steps = []
    for _ in range(n):
        pc: Counter = Counter()
        for w, f in words.items():
            for p in zip(w, w[1:]):
                pc[p] += f
        if not pc:
            break
        (a, b), c = min(pc.items(), key=lambda kv: (-kv[1], kv[0]))
        nw: Counter = Counter()
        for w, f in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            nw[tuple(out)] += f
        words = nw
        steps.append(((a, b), c))
    return steps


def test_incremental_trainer_matches_naive_recount():
    rng = random.Random(7)
    for _ in range(25):
        words: Counter = Counter()
        for _ in range(50):
            words[tuple(rng.choice("aabbc") for _ in range(rng.randint(1, 9)))] += rng.randint(1, 5)
        got = train_merges(words, 20, known=lambda s: False)
        assert [(s.pair, s.freq) for s in got] == _naive_bpe(words, len(got))


class _TokenizersTieBreak(FrequencyStats):
    """`tokenizers`' BpeTrainer order: the most frequent pair, ties to the smallest (left id, right id), where
    ids number the alphabet by code point and then every new token in the order it is made."""

    def order(self, pair, freq):
        return (-freq, pair[0], pair[1])


def test_trainer_matches_tokenizers_bpetrainer_on_flores():
    """Anchor: the trainer core learns the merges of `tokenizers.trainers.BpeTrainer` on real text (Estonian
    FLORES, GPT-2's byte-level pre-tokenizer). With our tie-break (lexicographic strings) the merges are equal
    until the first frequency tie, where both pick a pair of the same frequency; with BpeTrainer's tie-break
    (token ids) plugged in as pair statistics, all 2,000 merges are equal."""
    n = 2000
    lines = flores.lines("est_Latn")
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False)
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet) + n, initial_alphabet=alphabet, special_tokens=[], show_progress=False
    )
    hf.train_from_iterator(lines, trainer=trainer)
    want = parse_merges(json.loads(hf.to_str())["model"]["merges"])
    assert len(want) == n

    words = Counter(p for line in lines for p, _ in pre.pre_tokenize_str(line))
    pairs = [(tuple(w), c) for w, c in words.items()]
    known = set(alphabet).__contains__
    exact = learn(pairs, n, known=known, stats=_TokenizersTieBreak(), alphabet=sorted(alphabet))
    assert exact.merges == want

    ours = learn(pairs, n, known=known)
    got = ours.merges
    assert len(got) == n
    first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
    assert first > 50  # the frequent merges are tie-free and equal
    assert ours.pops[first].freq == exact.pops[first].freq  # the first difference is a tie
    assert [p.freq for p in ours.pops[:first]] == [p.freq for p in exact.pops[:first]]
