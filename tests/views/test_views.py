"""The read-only views of analysis/views/: vocabulary diff, id decoding and chat templates (engine and CLI)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from support import TOKENIZERS, load_shared

from analysis import load
from analysis.cli import main
from analysis.errors import DataError
from analysis.views.chat_template import SAMPLE_CONVERSATION, chat_templates, render_chat, render_conversation
from analysis.views.decode import decode_ids, parse_ids
from analysis.views.vocab_diff import MAX_VOCAB_LIMIT, vocab_diff, vocabulary_keys


def test_vocab_diff_compares_what_tokens_stand_for_across_flavours():
    gpt2, llama2 = load_shared("gpt2"), load_shared("llama-2")
    by_bytes = vocab_diff([gpt2, llama2])
    by_raw = vocab_diff([gpt2, llama2], by="raw")
    # GPT-2's "Ġthe" and Llama-2's "▁the" are the same token by bytes, different raw strings
    assert by_bytes.pair("gpt2", "llama-2").shared > 2 * by_raw.pair("gpt2", "llama-2").shared
    assert b" the" not in {u.readable.encode() for u in by_bytes.unique["gpt2"]}
    p = by_bytes.pairs[0]
    assert p.jaccard == pytest.approx(p.shared / p.union)
    assert p.union == by_bytes.sizes["gpt2"] + by_bytes.sizes["llama-2"] - p.shared
    for name in ("gpt2", "llama-2"):
        assert len(by_bytes.unique[name]) == by_bytes.sizes[name] - p.shared


@pytest.mark.slow
def test_vocab_diff_of_a_tokenizer_with_itself_and_with_three():
    gpt2 = load_shared("gpt2")
    same = vocab_diff([gpt2, gpt2], ["a", "b"])
    assert same.pair("a", "b").jaccard == 1.0 and not same.unique["a"] and not same.unique["b"]
    three = vocab_diff([gpt2, load_shared("llama-3.1"), load_shared("qwen3")])
    assert len(three.pairs) == 3
    assert three.shared_by_all <= min(p.shared for p in three.pairs)
    with pytest.raises(DataError):
        vocab_diff([gpt2])
    with pytest.raises(DataError):
        vocab_diff([gpt2, gpt2])  # two tokenizers under one name


def test_vocabulary_keys_of_a_whole_byte_level_vocabulary_are_each_tokens_bytes():
    """The byte-level vocabulary is mapped in one pass (join, translate, slice): the same keys, token by token,
    as :meth:`LoadedTokenizer.token_bytes` gives, the lowest id winning a shared key, added tokens by content."""
    gpt2 = load_shared("gpt2")
    keys = vocabulary_keys(gpt2)
    added = {a.content for a in gpt2.added_tokens}
    expected: dict = {}
    for tid, token in sorted(gpt2.id_to_token.items()):
        expected.setdefault(("added", token) if token in added else gpt2.token_bytes(token), (token, tid))
    assert keys == expected


def test_vocab_diff_refuses_a_vocabulary_over_the_limit_before_any_work(capsys):
    """A vocabulary over the limit is refused with its size and the limit (a 2,000,000-token upload held the
    page for minutes); the CLI raises the limit with --max-vocab, within bounds, and reports stages on stderr."""
    gpt2, qwen = load_shared("gpt2"), load_shared("qwen3")
    with pytest.raises(DataError, match=r"qwen3 has 151,\d{3} tokens.*at most 100,000 tokens.*--max-vocab"):
        vocab_diff([gpt2, qwen], max_vocab=100_000)
    with pytest.raises(DataError, match="must be 1 to"):
        vocab_diff([gpt2, qwen], max_vocab=MAX_VOCAB_LIMIT + 1)
    stages: list[str] = []
    d = vocab_diff(
        [gpt2, gpt2], ["stage-a", "stage-b"], progress=lambda done, total, msg="": stages.append(msg)
    )
    assert d.pair("stage-a", "stage-b").jaccard == 1.0
    assert (
        stages[0] == "reading the vocabulary of stage-a (50,257 tokens)"
        and "listing the tokens only in stage-b" in stages
    )
    g, q = str(TOKENIZERS / "gpt2"), str(TOKENIZERS / "qwen3")
    assert main(["vocab-diff", g, q, "--max-vocab", "100000"]) == 2
    assert "error: " in capsys.readouterr().err
    assert main(["vocab-diff", g, q, "--max-vocab", str(MAX_VOCAB_LIMIT + 1)]) == 2
    assert f"from 1 to {MAX_VOCAB_LIMIT}" in capsys.readouterr().err  # bounded as it is read (argparse)


def test_unique_tokens_export_as_csv():
    diff = vocab_diff([load_shared("gpt2"), load_shared("llama-3.1")])
    rows = list(csv.DictReader(io.StringIO(diff.unique_csv("gpt2"))))
    assert len(rows) == len(diff.unique["gpt2"]) > 0
    gpt2 = load_shared("gpt2")
    assert all(gpt2.vocab[r["token"]] == int(r["id"])
               for r in rows[:200] if r["token"] in gpt2.vocab)  # fmt: skip
    assert json.loads(json.dumps(diff.to_json()))["pairs"][0]["shared"] == diff.pairs[0].shared


@pytest.mark.parametrize(
    "text", ["15496 11 995", "[15496, 11, 995]", "tensor([[15496, 11, 995]])", "15496,11;995"]
)
def test_parse_ids_takes_the_forms_people_paste(text):
    assert parse_ids(text) == [15496, 11, 995]


@pytest.mark.parametrize("text", ["[1, 2", "[[15496, 11]", "tensor([[1, 2]]", "1, 2]"])
def test_parse_ids_refuses_a_list_cut_off_when_copied(text):
    with pytest.raises(DataError, match="brackets do not pair up"):
        parse_ids(text)


def test_parse_ids_names_the_bad_item():
    with pytest.raises(DataError, match="item 2"):
        parse_ids("1 x 3")
    with pytest.raises(DataError):
        parse_ids("1 -3")


@pytest.mark.parametrize("text", ["٣", "１２", "1 ²"])
def test_parse_ids_takes_only_ascii_digits(text):
    """Python's int() reads Arabic-Indic and full-width digits; a token id is written 0–9."""
    with pytest.raises(DataError, match="not a token id"):
        parse_ids(text)


@pytest.mark.parametrize("digits", [19, 5_000])
def test_parse_ids_refuses_a_number_no_vocabulary_reaches(digits):
    """A pasted hash or long number is refused by name, never int()'s own ValueError (over 4,300 digits)."""
    with pytest.raises(DataError, match="item 2 .* too large for a token id"):
        parse_ids("7 " + "9" * digits)
    assert parse_ids("9" * 18) == [10**18 - 1]


def test_decode_round_trips_and_lists_unknown_ids():
    llama = load_shared("llama-3.1")
    text = "Tere hommikust, world!"
    ids = llama.tokenizer.encode(text, add_special_tokens=True).ids
    out = decode_ids(llama, [*ids, 10**7])
    assert out.text == llama.tokenizer.decode(ids, skip_special_tokens=False)
    assert text in out.text and out.tokens[0].special and out.unknown == [10**7]
    assert out.n_decoded == len(ids)  # the id left out is not counted as decoded (the page said "6 ids" of 5)
    skipped = decode_ids(llama, ids, skip_special=True)
    assert skipped.text == text and skipped.n_decoded == len(ids) - 1  # the BOS is not decoded either


def test_chat_template_from_the_config_and_from_chat_template_jinja():
    assert "default" in chat_templates(load_shared("llama-3.1"))
    smol = load(TOKENIZERS / "smollm2-135m-instruct")  # the template lives in chat_template.jinja
    assert chat_templates(smol), "chat_template.jinja is read into the config"
    out = render_chat(smol, SAMPLE_CONVERSATION)
    assert out.text.count("<|im_start|>") == len(SAMPLE_CONVERSATION) + 1  # + the generation prompt
    assert out.ids == smol.tokenizer.encode(out.text, add_special_tokens=False).ids
    assert [t.token for t in out.tokens if t.special].count("<|im_start|>") == len(SAMPLE_CONVERSATION) + 1
    assert render_chat(smol, SAMPLE_CONVERSATION, add_generation_prompt=False).text.count("<|im_start|>") == 4


def test_chat_template_errors_are_data_errors():
    with pytest.raises(DataError, match="no chat template"):
        render_chat(load_shared("gpt2"), SAMPLE_CONVERSATION)
    with pytest.raises(DataError, match="System role not supported"):  # the template's own raise_exception
        render_chat(load_shared("gemma"), SAMPLE_CONVERSATION)
    with pytest.raises(DataError, match="message 1"):
        render_chat(load_shared("qwen3"), [{"role": "user"}])


def test_the_sample_conversation_leaves_out_its_system_message_where_the_template_refuses_one():
    """Gemma's template raises on a system role: the sample is rendered without it (a note says so), so the
    first view of a Gemma tokenizer is its conversation, not an error."""
    gemma = load_shared("gemma")
    out, note = render_conversation(gemma)
    bare = [m for m in SAMPLE_CONVERSATION if m["role"] != "system"]
    assert out.ids == render_chat(gemma, bare).ids and "System role not supported" in note
    out, note = render_conversation(load_shared("qwen3"), add_generation_prompt=False)
    assert (
        note == ""
        and out.ids == render_chat(load_shared("qwen3"), SAMPLE_CONVERSATION, add_generation_prompt=False).ids
    )
    with pytest.raises(DataError, match="no chat template"):  # failing either way: the whole sample's error
        render_conversation(load_shared("gpt2"))


def test_decode_without_ids_names_what_is_missing(capsys):
    """`decode TOKENIZER` without ids says the ids are missing (it took the tokenizer for an id and said that no
    tokenizer was given), and a list cut off when copied is refused: both one error line, exit 2."""
    g = str(TOKENIZERS / "gpt2")
    assert main(["decode", g]) == 2
    assert "required: ids" in capsys.readouterr().err
    assert main(["decode", g, "[15496,", "11"]) == 2
    assert "brackets do not pair up" in capsys.readouterr().err
    assert main(["decode", g, "[15496,", "11]"]) == 0
    assert capsys.readouterr().out.startswith("Hello,")


@pytest.mark.slow
def test_cli_of_the_views(capsys, tmp_path):
    g, q = str(TOKENIZERS / "gpt2"), str(TOKENIZERS / "qwen3")
    assert main(["vocab-diff", g, q, "--json", "--unique-csv", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["pairs"][0]["a"] == "gpt2" and (tmp_path / "unique-qwen3.csv").is_file()
    assert main(["decode", g, "15496", "11", "995"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "Hello, world"
    assert main(["chat-template", q, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_special"] > 0
    assert main(["chat-template", str(TOKENIZERS / "gemma")]) == 0
    assert capsys.readouterr().out.startswith(
        "note: The template of gemma refuses the sample's system message"
    )
    assert main(["decode", g, "abc"]) == 2
