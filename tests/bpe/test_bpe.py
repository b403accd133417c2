"""Step-wise BPE replay vs the Rust `tokenizers` library, merge trees and vocabulary structure."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from support import BPE_TOKENIZERS, flores_lines, load_shared

from analysis import LoadedTokenizer
from analysis.bpe import (
    BPEReplay,
    MergeEvent,
    SortedPairs,
    get_replay,
    iter_tree,
    merge_tree,
    pair_ranks,
    tree_depth,
    vocabulary_structure,
)
from analysis.bpe import structure as bpe_structure
from analysis.errors import UnsupportedTokenizerError

FLORES_LANGS = [
    "eng_Latn",
    "zho_Hans",
    "hin_Deva",
    "arb_Arab",
    "rus_Cyrl",
    "vie_Latn",
    "kor_Hang",
    "amh_Ethi",
]
HEAVY = {"gemma", "llama-3.1", "mistral-nemo", "qwen3"}


def _params(names):
    return [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in names]


# ------------------------------------------------------------------------------------------ full pipeline
@pytest.mark.parametrize("name", _params(BPE_TOKENIZERS))
def test_replay_matches_rust_on_flores(name):
    """Token for token, 8 languages x 100 lines (incl. scripts that need byte fallback / unk)."""
    tok = load_shared(name)
    rep = get_replay(tok)
    rust = tok.tokenizer
    mismatches = []
    for lang in FLORES_LANGS:
        lines = flores_lines(lang, 100)
        for line, enc in zip(lines, rust.encode_batch(lines, add_special_tokens=False)):
            mine = rep.tokenize(line)
            if mine != enc.tokens:
                mismatches.append((lang, line[:50], mine[:12], enc.tokens[:12]))
    assert not mismatches, mismatches[:3]


@pytest.mark.parametrize("name", ["gpt2", "llama-2", "mistral-7b-v0.3", "smollm2-135m-instruct"])
def test_replay_model_level_on_vocab_strings(name):
    """tokenize_word == model.tokenize (own flags) on a vocabulary sample and on odd strings."""
    tok = load_shared(name)
    rep = BPEReplay(tok)
    model = tok.tokenizer.model
    rnd = random.Random(0)
    words = rnd.sample(sorted(tok.vocab), 3000)
    # concatenations of two vocab strings exercise merges across token boundaries
    words += [a + b for a, b in zip(words[:1500], words[1500:])]
    words += [
        "",
        "a",
        "\u2581\u2581\u2581",
        "ĠĠĠĠ",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "日本語のテキスト",
        "x\u0301y",
        "<0x41>",
        "🤗🤗",
    ]
    bad = [w for w in words if rep.tokenize_word(w)[0] != [t.value for t in model.tokenize(w)]]
    assert not bad, bad[:5]


def test_added_tokens_split_like_rust():
    """Special tokens inside text, at the start (Metaspace prepend_scheme=first) and glued to words."""
    texts = [
        "<s>Hello</s> world<unk>!",
        "Hello <s> world",
        "  <s>  spaced  ",
        "[INST] Who are you? [/INST] I am<s>",
    ]
    for name in ("llama-2", "mistral-7b-v0.3", "gpt2", "qwen3"):
        tok = load_shared(name)
        rep = get_replay(tok)
        extra = ["<|endoftext|>Hi<|endoftext|>", "a<|im_start|>user\nhi<|im_end|>"]
        for t in texts + extra:
            assert rep.tokenize(t) == tok.tokenizer.encode(t, add_special_tokens=False).tokens, (name, t)


def test_ignore_merges_on_and_off():
    """Llama-3.1 uses ignore_merges: an unreachable token is one piece with it, several without."""
    tok = load_shared("llama-3.1")
    word = "Ġviá»ĩc"  # ' việc', one of the 588 unreachable tokens
    assert word in tok.vocab
    on = BPEReplay(tok)
    off = BPEReplay(tok, ignore_merges=False)
    assert on.tokenize_word(word) == ([word], [])
    pieces, events = off.tokenize_word(word)
    assert len(pieces) > 1 and events and all(isinstance(e, MergeEvent) for e in events)
    assert pieces == [t.value for t in tok.tokenizer.model.tokenize(word + "\U0010fffd")]


def test_events_are_ordered_and_consistent():
    """Every event joins two current neighbours into a vocab token with the stated merge rank."""
    tok = load_shared("gpt2")
    rep = BPEReplay(tok)
    pieces, events = rep.tokenize_word("Ġunbelievably")
    assert "".join(pieces) == "Ġunbelievably"
    merges = {m: i for i, m in enumerate(tok.merges)}
    for e in events:
        assert e.left + e.right == e.result
        assert merges[(e.left, e.right)] == e.rank
    assert pieces[-1] == events[-1].result or pieces[0] == events[-1].result


def test_prefix_suffix_and_spaces_in_tokens():
    """continuing_subword_prefix / end_of_word_suffix and a token containing a space, vs Rust."""
    vocab = {
        "a": 0,
        "b": 1,
        "c": 2,
        "##b": 3,
        "##c": 4,
        "a##b": 5,
        "ab": 6,
        "c</w>": 7,
        "##c</w>": 8,
        "##bc</w>": 9,
        "x y": 10,
        "x": 11,
        " ": 12,
        "##y": 13,
        "## ": 14,
        "x ": 15,
        "[UNK]": 16,
        "abc</w>": 17,
    }
    merges = [["a", "##b"], ["##b", "##c</w>"], ["ab", "##c</w>"], ["x", "## "], ["x ", "##y"]]
    doc = {
        "version": "1.0",
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": None,
        "model": {
            "type": "BPE",
            "vocab": vocab,
            "merges": merges,
            "continuing_subword_prefix": "##",
            "end_of_word_suffix": "</w>",
            "unk_token": "[UNK]",
            "fuse_unk": False,
            "byte_fallback": False,
        },
    }
    tok = LoadedTokenizer.from_document(json.loads(json.dumps(doc)), name="toy")
    rep = BPEReplay(tok)
    for w in ["abc", "ab", "x y", "xyz", "cab", "a", "qq", "bc"]:
        assert rep.tokenize_word(w)[0] == [t.value for t in tok.tokenizer.model.tokenize(w)], w


def test_byte_fallback_and_unk_pieces():
    """SentencePiece-style: unknown characters become <0xNN> pieces (Llama-2), unk elsewhere."""
    tok = load_shared("llama-2")
    rep = get_replay(tok)
    text = "ꯃꯤꯇꯩ 𝔘 text"
    assert rep.tokenize(text) == tok.tokenizer.encode(text, add_special_tokens=False).tokens
    assert any(p.startswith("<0x") for p in rep.tokenize(text))


def test_non_bpe_is_refused():
    with pytest.raises(UnsupportedTokenizerError, match="BPE"):
        BPEReplay(load_shared("bert-base-uncased"))
    with pytest.raises(UnsupportedTokenizerError):
        vocabulary_structure(load_shared("pegasus-unigram"))


# ------------------------------------------------------------------------------------------ merge trees
def test_merge_tree_of_reachable_token():
    tok = load_shared("gpt2")
    tree = merge_tree(tok, "Ġunbelievable")
    assert tree["reachable"] and tree["token"] == "Ġunbelievable" and tree["id"] == tok.vocab["Ġunbelievable"]
    leaves = [n["token"] for n, _ in iter_tree(tree) if not n["children"]]
    assert "".join(leaves) == "Ġunbelievable" and all(len(x) == 1 for x in leaves)
    ranks = [n["rank"] for n, _ in iter_tree(tree) if n["children"]]
    assert tree["rank"] == max(ranks)  # GPT-2's trained merges grow along every tree
    assert tree_depth(tree) >= 2


def test_merge_tree_of_unreachable_token_shows_actual_pieces():
    tok = load_shared("llama-3.1")
    tree = merge_tree(tok, "Ġviá»ĩc")
    assert tree["reachable"] is False and tree["rank"] is None
    assert [c["token"] for c in tree["children"]] == ["Ġvi", "á»ĩ", "c"]


def test_text_trees_cover_every_token():
    tok = load_shared("qwen3")
    rep = get_replay(tok)
    text = "Tokenizers split text<|im_end|> into pieces."
    trees = rep.text_trees(text)
    assert [t["token"] for t in trees] == tok.tokenizer.encode(text, add_special_tokens=False).tokens
    assert any(t.get("added") for t in trees)


# ------------------------------------------------------------------------------------------ structure
def _replayed_structure(tok):
    """Reference: replay every vocab string step by step (methods.md §5), first merge per token."""
    rep = BPEReplay(tok, ignore_merges=False)
    split = {}
    for s in tok.vocab:
        for a, b, r, _rank, _pos in rep._run(s)[2]:
            split.setdefault(r, (a, b))
    return split


@pytest.mark.parametrize("name", ["gpt2", "llama-2", "smollm2-135m-instruct"])
def test_vocabulary_structure_matches_full_replay(name, tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    tok = load_shared(name)
    vs = vocabulary_structure(tok, disk_cache=False)
    assert vs.split == _replayed_structure(tok)
    all_ids = set(tok.vocab.values())
    produced = set(vs.split)
    assert vs.atomic == all_ids - vs.unreachable - produced
    components = {x for ab in vs.split.values() for x in ab}
    assert vs.leaves == (vs.unreachable | produced) - components
    for t, (a, b) in list(vs.split.items())[:2000]:
        assert vs.depth[t] == 1 + max(vs.depth[a], vs.depth[b])
        assert tok.merges[vs.final_rank[t]] == (tok.id_to_token[a], tok.id_to_token[b])
    assert sum(vs.downstream.values()) == 2 * len(vs.split)
    assert not set(vs.dead_merges) & set(vs.final_rank.values())
    assert len(vs.dead_merges) + len(set(vs.final_rank.values())) == len(tok.merges)


@pytest.mark.slow
def test_vocabulary_structure_llama3_sample_vs_replay(tmp_path, monkeypatch):
    """Llama-3.1's merge ranks are not monotone along trees; splits still equal the step-wise replay."""
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    tok = load_shared("llama-3.1")
    vs = vocabulary_structure(tok)
    assert len(vs.unreachable) == 588
    assert vs.unreachable <= vs.leaves and not vs.unreachable & vs.atomic
    rep = BPEReplay(tok, ignore_merges=False)
    rnd = random.Random(1)
    # tokens whose parts are not built in rank order: the array code hands them to the replay
    odd = [tok.vocab[s] for s in (".:.:.:.:", "Ġnghiá»ĩp", "Ġnghiá»ĩm", "ĠaraÅŁtÄ±r", "ÐµÑĢÐ°ÑĤÑĥÑĢÐ°")]
    for t in rnd.sample(sorted(vs.split), 4000) + odd:
        a, b, _r, rank, _p = rep._run(tok.id_to_token[t])[2][-1]
        assert vs.split[t] == (a, b) and vs.final_rank[t] == rank
    # disk cache round trip
    bpe_structure._structure.cache_clear()  # memory only: the next call reads the disk cache
    again = vocabulary_structure(tok)
    assert again.split == vs.split and again.dead_merges == vs.dead_merges


def _toy_bpe(vocab: dict[str, int], merges: list[list[str]]) -> LoadedTokenizer:
    doc = {
        "version": "1.0",
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": None,
        "model": {"type": "BPE", "vocab": vocab, "merges": merges},
    }
    return LoadedTokenizer.from_document(doc, name="toy")


def test_structure_on_toy_merges_with_straddles_and_a_repeated_pair(tmp_path, monkeypatch):
    """Several candidate splits per token, a merge that straddles the likelier split, a pair listed twice
    (the Rust map keeps its last rank): the array code must agree with the step-wise replay."""
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    vocab = {c: i for i, c in enumerate("abcde")}
    for s in ("bc", "ab", "abc", "cd", "abcd", "de", "bcd", "bcde", "abcde", "cde"):
        vocab[s] = len(vocab)
    merges = [
        ["b", "c"], ["a", "b"], ["ab", "c"], ["c", "d"], ["a", "bc"], ["abc", "d"], ["d", "e"],
        ["bc", "d"], ["bcd", "e"], ["a", "bcde"], ["ab", "cde"], ["c", "de"], ["a", "b"],
    ]  # fmt: skip
    tok = _toy_bpe(vocab, merges)
    vs = vocabulary_structure(tok, disk_cache=False)
    assert vs.split == _replayed_structure(tok)
    assert vs.split[vocab["abc"]] == (vocab["a"], vocab["bc"])  # b+c (rank 0) wins over a+b
    assert vs.final_rank[vocab["ab"]] == 12  # the repeated pair keeps its last rank
    rep = BPEReplay(tok, ignore_merges=False)
    for s in vocab:
        a, b, _r, rank, _p = rep._run(s)[2][-1] if len(s) > 1 else (0, 0, 0, -1, 0)
        if len(s) > 1 and vocab[s] in vs.split:
            assert vs.split[vocab[s]] == (a, b) and vs.final_rank[vocab[s]] == rank


def test_sorted_pair_lookup_equals_the_pair_dict():
    """The replay over sorted key arrays (used for the few tokens the array code cannot decide) equals the
    dict-backed replay."""
    tok = load_shared("gpt2")
    pairs, stride = pair_ranks(tok)
    keys = np.array(sorted(pairs), dtype=np.int64)
    sp = SortedPairs(keys, np.array([pairs[k] for k in keys.tolist()], dtype=np.int64))
    rnd = random.Random(3)
    for k in rnd.sample(sorted(pairs), 500) + [0, stride * stride, 12345678]:
        assert sp.get(k) == pairs.get(k)
    slow = BPEReplay(tok, ignore_merges=False, pairs=(sp, stride))
    fast = BPEReplay(tok, ignore_merges=False)
    for s in rnd.sample(sorted(tok.vocab), 300):
        assert slow._run(s) == fast._run(s)


def test_byte_pieces_are_atomic_not_unreachable(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path))
    tok = load_shared("llama-2")
    vs = vocabulary_structure(tok, disk_cache=False)
    byte_ids = {i for s, i in tok.vocab.items() if tok.is_byte_piece(s)}
    assert len(byte_ids) == 256 and byte_ids <= vs.atomic and not vs.unreachable
    the = tok.vocab["▁the"]
    assert the in vs.split and vs.downstream.get(the, 0) > 0
    assert any(the in vs.split[c] for c in vs.children_of(the))
