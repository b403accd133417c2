"""The pages of the read-only views: Vocabulary diff, Chat template and the Playground's decode box (AppTest)."""

from __future__ import annotations

import hashlib
from urllib.parse import parse_qs, urlparse

import pytest
from app_support import open_page
from support import flores_lines, load_shared

from analysis.core.cache import store_dir
from analysis.core.workspace import default_store
from analysis.views.chat_template import SAMPLE_CONVERSATION, render_chat
from analysis.views.vocab_diff import vocab_diff


@pytest.mark.slow
def test_vocab_diff_page_shows_the_engine_numbers_and_the_unique_tokens():
    at = open_page("pages/vocab_diff.py", t=["example:gpt2", "example:llama-3.1"])
    assert at.multiselect(key="vd-toks").value == ["gpt2", "llama-3.1"]
    d = vocab_diff([load_shared("gpt2"), load_shared("llama-3.1")], ["gpt2", "llama-3.1"])
    pairs = next(f.value for f in at.dataframe if "Jaccard" in f.value.columns)
    assert pairs["Shared tokens"].tolist() == [d.pairs[0].shared]
    unique = [f.value for f in at.dataframe if "Raw token" in f.value.columns]
    assert [len(u) for u in unique] == [len(d.unique["gpt2"]), len(d.unique["llama-3.1"])]
    assert [m.value for m in at.metric][:2] == [f"{d.union:,}", f"{d.shared_by_all:,}"]


def test_vocab_diff_page_refuses_a_vocabulary_over_its_limit(monkeypatch):
    """The page holds the server while it compares: a vocabulary over its limit gets one clear message before any
    work (a 2,000,000-token upload held it for minutes). The limit is lowered here to stand for such a file."""
    monkeypatch.setattr("analysis.views.vocab_diff.MAX_VOCAB", 100)
    at = open_page("pages/vocab_diff.py", t=["embedded:", "example:gpt2"])
    assert any(
        " tokens; the vocabulary diff compares vocabularies of at most 100 tokens" in e.value
        for e in at.error
    )
    assert not at.get("metric")


def test_vocab_diff_page_with_one_tokenizer_asks_for_two():
    at = open_page("pages/vocab_diff.py")
    assert any("at least two" in i.value for i in at.info)


@pytest.mark.slow
def test_chat_template_page_renders_the_conversation_with_its_ids():
    at = open_page("pages/chat_template.py", t="example:qwen3")
    ids = render_chat(load_shared("qwen3"), SAMPLE_CONVERSATION).ids
    assert " ".join(map(str, ids)) in [c.value for c in at.code]
    at.toggle(key="ct-gen").set_value(False).run()
    ids = render_chat(load_shared("qwen3"), SAMPLE_CONVERSATION, add_generation_prompt=False).ids
    assert " ".join(map(str, ids)) in [c.value for c in at.code]


@pytest.mark.slow
def test_chat_template_page_explains_a_missing_or_failing_template():
    at = open_page("pages/chat_template.py", t="example:gpt2")
    assert any("no chat template" in i.value for i in at.info)
    at = open_page("pages/chat_template.py", t="example:gemma")  # refuses the sample's system message
    assert not at.error and any("System role not supported" in i.value for i in at.info)
    bare = [m for m in SAMPLE_CONVERSATION if m["role"] != "system"]
    assert " ".join(map(str, render_chat(load_shared("gemma"), bare).ids)) in [c.value for c in at.code]


LONG = "Tere hommikust! " * 200  # 3,200 characters: longer than a URL carries


def _param(at, key: str) -> str:
    v = at.query_params[key]
    return v[0] if isinstance(v, list) else v


def test_a_long_text_reaches_the_disk_only_for_a_share_link_under_a_random_id():
    store = default_store()
    at = open_page("pages/playground.py", t="example:gpt2")
    ws = _param(at, "ws")
    at.text_area(key="pg-text").set_value(LONG).run()
    assert "text" not in at.query_params and "textid" not in at.query_params
    assert store.inputs(ws)["pg-text"] == LONG and store.usage(ws).items == 1  # its own workspace; no share
    assert not (store_dir() / "shared-texts").exists()  # no copy under the text's hash any more
    at.button(key="pg-share").click().run()
    link = next(c.value for c in at.code if "textid=" in c.value)
    query = parse_qs(urlparse(link).query)
    assert "ws" not in query and store.usage(ws).items == 2  # the link names no workspace
    sid = query["textid"][0]
    assert len(sid) == 22 and sid not in hashlib.sha256(LONG.encode()).hexdigest()
    again = open_page("pages/playground.py", **query)  # a new session opens the link
    assert again.text_area(key="pg-text").value == LONG and _param(again, "ws") != ws


def test_a_link_whose_text_is_gone_says_so():
    at = open_page("pages/playground.py", t="example:gpt2", textid="0123456789abcdefABCDEF")
    assert any("no longer on this server" in w.value for w in at.warning)


def test_a_share_the_workspace_cannot_hold_is_refused_with_a_message(monkeypatch):
    at = open_page("pages/playground.py", t="example:gpt2")
    monkeypatch.setenv("TOKLAB_WORKSPACE_MAX_ITEMS", "1")
    at.text_area(key="pg-text").set_value(LONG).run()
    at.button(key="pg-share").click().run()
    at.button(key="pg-share").click().run()  # the second share goes over one item
    assert any("workspace is full" in e.value for e in at.error)


def test_playground_live_mode_keeps_the_text_and_updates_from_the_live_box():
    at = open_page("pages/playground.py", t="example:gpt2", text="Hello\nworld")
    gpt2 = load_shared("gpt2").tokenizer
    at.toggle(key="pg-live").set_value(True).run()
    # the line break is kept: shown as a mark in the one-line box, tokenized as a line break
    assert at.text_input(key="pg-live-text").value == "Hello\u2424world"
    ids = gpt2.encode("Hello\nworld", add_special_tokens=False).ids
    assert " ".join(map(str, ids)) in [c.value for c in at.code]
    at.text_input(key="pg-live-text").set_value("tere\u2424hommikust").run()
    ids = gpt2.encode("tere\nhommikust", add_special_tokens=False).ids
    assert " ".join(map(str, ids)) in [c.value for c in at.code]
    at.toggle(key="pg-live").set_value(False).run()
    assert at.text_area(key="pg-text").value == "tere\nhommikust"  # and comes back as a line break


def test_playground_decode_box():
    at = open_page("pages/playground.py", t="example:gpt2")
    at.text_area(key="pg-dec-ids").set_value("[15496, 11, 995, 99999999]").run()
    assert "Hello, world" in [c.value for c in at.code]
    assert any("outside gpt2's vocabulary" in w.value for w in at.warning)
    at.text_area(key="pg-dec-ids").set_value("15496 abc").run()
    assert any("is not a token id" in e.value for e in at.error)


def test_drift_page_compares_two_tokenizers_and_shows_the_cli_command():
    """Two loadings of gpt2 (the library's example and the same files again): identical ids; the tables carry the
    engine's counts."""
    at = open_page("pages/drift.py", t="example:gpt2")
    assert at.selectbox(key="dr-a").value == at.selectbox(key="dr-b").value == "gpt2"
    at.multiselect(key="dr-langs").set_value(["est_Latn"])
    at.multiselect(key="dr-content").set_value(["numbers"]).run()
    assert any("analysis drift" in c.value and "--langs est_Latn" in c.value for c in at.caption)
    at.button(key="dr-run").click().run()
    assert not at.exception and not at.error
    assert at.metric[0].value == "identical ids"
    gpt2 = load_shared("gpt2")
    langs = next(f.value for f in at.dataframe if "Language" in f.value.columns)
    direct = sum(len(gpt2.tokenizer.encode(s).ids) for s in flores_lines("est_Latn"))
    assert langs["Tokens A"].tolist() == langs["Tokens B"].tolist() == [direct]
