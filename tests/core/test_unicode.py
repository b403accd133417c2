"""The one Unicode source: the committed script table equals the `regex` module's Script property, and every
view that names a token's script (Inspect, Prune by script, continued training, R-BPE) reads it."""

from __future__ import annotations

import regex
from support import load_shared

from analysis.bpe.training import sp_piece_valid
from analysis.core import unicode
from analysis.methods import pruning, reuse
from analysis.tokenizer.vocab_table import vocab_table


def test_script_table_equals_regex_script_property():
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    got: dict[str, set[int]] = {}
    for start, end, name in zip(*unicode._script_table()):
        got.setdefault(name, set()).update(range(start, end + 1))
    for name in unicode.scripts():
        prop = name.replace(" ", "_").replace("-", "_")
        want = {ord(c) for c in regex.findall(rf"\p{{Script={prop}}}", text)}
        assert got[name] == want, name


def test_block_table_equals_regex_block_property():
    for b in unicode.blocks()[::7]:
        prop = b.name.replace(" ", "_")
        pat = regex.compile(rf"\p{{Block={prop}}}")
        assert pat.match(chr(b.start)) and pat.match(chr(b.end)), b.name
        assert unicode.block(chr(b.start)) == b.name


def test_sentencepiece_rule_is_a_small_mapping_on_top():
    assert unicode.script("カ") == "Katakana" and unicode.sentencepiece_script("カ") == "Han"
    assert unicode.script("ー") == "Common" and unicode.sentencepiece_script("ー") == "Han"
    assert unicode.sentencepiece_script("ж") == unicode.script("ж") == "Cyrillic"
    assert sp_piece_valid("カ漢") and not sp_piece_valid("aж")


def test_find_script_accepts_user_spellings():
    assert unicode.find_script("ol_chiki") == unicode.find_script("OL CHIKI") == "Ol Chiki"
    assert unicode.find_script("canadian_aboriginal") == "Canadian Aboriginal"
    assert unicode.find_script("klingon") is None


def test_inspect_prune_and_reuse_agree_on_a_token():
    """One token, three views: its Inspect script label, whether Prune-by-script removes it, its R-BPE class."""
    tok = load_shared("llama-3.1")
    table = vocab_table(tok).set_index("token")
    token = tok.tokenizer.encode(" мир", add_special_tokens=False).tokens[0]  # ' мир' is one token
    assert table.loc[token, "script"] == "Cyrillic"
    tid = tok.vocab[token]
    assert tid in set(pruning.script_order(tok, ["Latin"]).ids)
    assert tid not in set(pruning.script_order(tok, ["Latin", "cyrillic"]).ids)
    assert reuse.standalone_text(tok, token) == " мир"
    assert reuse.text_labels(reuse.standalone_text(tok, token).strip()) == ("Cyrillic",)
    assert unicode.block("м") == "Cyrillic" and unicode.script("м") == "Cyrillic"
