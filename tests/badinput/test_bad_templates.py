"""Hostile chat templates (issue 54, items 1–3 and 15): each ends in one clear error within the limits of
analysis.views.template_worker, in the engine, the CLI and the page, and never holds up another render."""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest
from bad_run import assert_clear_error
from streamlit.testing.v1 import AppTest
from support import ROOT, TOKENIZERS, load_shared

from analysis import load_folder
from analysis.errors import DataError
from analysis.views import template_worker
from analysis.views.chat_template import SAMPLE_CONVERSATION, render_chat
from analysis.views.template_sandbox import render_template

CONTEXT = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True,
           "bos_token": "", "eos_token": "", "tools": None, "documents": None}  # fmt: skip
ENDLESS = "{% for a in range(99999) %}{% for b in range(99999) %}{% for c in range(99999) %}{% endfor %}{% endfor %}{% endfor %}"

HOSTILE = {
    "a string repeated a billion times": ("{{ 'x' * 1000000000 }}", "repeating"),
    "10 kB printed 100,000 times": (
        "{% for i in range(100000) %}{{ 'y' * 10000 }}{% endfor %}",
        "output passed",
    ),
    "range(10**12)": ("{{ range(10**12) }}", "too large"),
    "a macro calling itself": ("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}", "calls itself"),
    "a string doubled 40 times": (
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        "memory",
    ),
    "a huge power": ("{{ 7 ** 99999999 }}", "too large"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_template_ends_in_one_clear_error(name):
    source, words = HOSTILE[name]
    with pytest.raises(DataError, match=words) as e:
        render_template(source, CONTEXT)
    assert str(e.value).startswith("the chat template failed: ") and "\n" not in str(e.value)


def test_an_endless_template_is_stopped_while_other_renders_go_on(monkeypatch):
    monkeypatch.setattr(template_worker, "TIME_LIMIT_S", 3.0)  # the caller's deadline (10 s in use)
    got: list[BaseException] = []

    def hostile() -> None:
        try:
            render_template(ENDLESS, CONTEXT)
        except DataError as e:
            got.append(e)

    t = threading.Thread(target=hostile)
    t.start()
    smol = load_shared("smollm2-135m-instruct")
    assert "<|im_start|>user" in render_chat(smol, SAMPLE_CONVERSATION).text  # another session's render
    assert t.is_alive()  # … finished while the hostile one still ran
    t.join(60)
    assert len(got) == 1 and "ran longer than 3 s" in str(got[0])
    assert (
        render_template("{{ messages[0].content }}", CONTEXT) == "hi"
    )  # the next render gets a fresh process


def _with_template(folder, template: str):
    """smollm2's tokenizer copied into `folder` with `template` as its chat template."""
    src = TOKENIZERS / "smollm2-135m-instruct"
    folder.mkdir()
    shutil.copy(src / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_the_cli_reports_a_hostile_template_and_bounds_the_messages_file(cli, tmp_path):
    folder = _with_template(tmp_path / "tok", "{{ range(10**12) }}")
    assert_clear_error(cli("chat-template", folder), "too large")
    good = _with_template(tmp_path / "good", "{% for m in messages %}{{ m.content }}{% endfor %}")
    big = tmp_path / "big.json"
    big.write_text(json.dumps([{"role": "user", "content": "x" * 9_000_000}]), encoding="utf-8")
    assert_clear_error(cli("chat-template", good, "--messages", big), "limit for a messages file")
    long = tmp_path / "long.json"
    long.write_text(json.dumps([{"role": "user", "content": "x" * 1_500_000}]), encoding="utf-8")
    assert_clear_error(cli("chat-template", good, "--messages", long), "conversation is 1,500,004 characters")
    fifo = tmp_path / "messages.fifo"
    os.mkfifo(fifo)
    assert_clear_error(cli("chat-template", good, "--messages", fifo), "FIFO")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"[{\xff")
    assert_clear_error(cli("chat-template", good, "--messages", bad), "messages file")


def test_the_page_shows_one_clear_error_for_a_hostile_template(tmp_path):
    tok = load_folder(_with_template(tmp_path / "hostile", "{{ 'x' * 1000000000 }}"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["toklab_library"] = {"hostile": tok}
    at.switch_page("pages/chat_template.py").run()
    assert not at.exception, [e.message for e in at.exception]
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "the chat template of hostile failed" in errors[0], errors
    assert "bug" not in errors[0]
