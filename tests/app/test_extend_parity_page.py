"""AppTest for the Extend page's parity-aware auxiliary section: plain vs parity-aware auxiliary tokenizer of a
naive method on FLORES training lines of several languages (Foroutan et al. 2025), equal to the engine's
`compare_parity` (what `python -m analysis extend --parity` reports); on a non-byte-level base the section says
why it does not apply."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared

from analysis.cli import main
from analysis.commands._equivalent import argv_of
from analysis.methods.extension import compare_parity, parity_text
from analysis.texts.flores import split_lines
from analysis.tokenizer.defaults import DEFAULT_NAME, default_tokenizer

LANGS = ["est_Latn", "fin_Latn"]
N = 200
COLUMNS = {"premium mean": "premium_mean", "premium max": "premium_max", "premium Gini": "premium_gini",
           "premium std": "premium_std", "bytes/token": "bytes_per_token"}  # fmt: skip


def _extend(name: str, methods: list[str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["toklab_library"] = {DEFAULT_NAME: default_tokenizer(), name: load_shared(name)}
    at.run()
    at.switch_page("pages/extend.py").run()
    at.selectbox(key="ext-tok").set_value(name).run()
    at.multiselect(key="ext-corpora").set_value([]).run()
    at.multiselect(key="ext-methods").set_value(methods).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.mark.slow
def test_parity_section_equals_compare_parity(capsys):
    at = _extend("gpt2", ["continued", "regen"])
    at.number_input(key="ext-nmax").set_value(N).run()
    assert at.multiselect(key="ext-par-langs").value[:2] == ["est_Latn", "eng_Latn"]  # the target first
    at.multiselect(key="ext-par-langs").set_value(LANGS).run()
    assert at.selectbox(key="ext-par-method").value == "regen"  # the chosen naive method
    assert not [d for d in at.dataframe if "auxiliary" in d.value.columns]  # nothing before the button
    at.button(key="ext-par-run").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    table = next(d.value for d in at.dataframe if "auxiliary" in d.value.columns)
    assert table["auxiliary"].tolist() == ["plain auxiliary", "parity-aware auxiliary"]
    pt = parity_text({c: split_lines(c)[0] for c in LANGS}, "base")
    ref, _ = compare_parity(load_shared("gpt2"), "regen", N, pt)
    assert 0 < ref["plain"]["added"] == ref["parity"]["added"] == ref["n"] <= N  # the auxiliaries' new tokens
    for row, side in zip(table.to_dict("records"), ("plain", "parity")):
        assert {c: row[c] for c in COLUMNS} == {c: ref[side]["summary"][k] for c, k in COLUMNS.items()}
    capsys.readouterr()
    (command,) = [
        line for c in at.code if c.language == "bash" for line in c.value.splitlines() if "--parity" in line
    ]
    assert (
        f"--method regen --n {N} --flores {LANGS[0]} --flores {LANGS[1]}" in command
    )  # the page's shown command
    assert main(argv_of(command)) == 0
    cli = json.loads(capsys.readouterr().out)["parity"]  # the CLI's parity section: the same numbers
    for row, side in zip(table.to_dict("records"), ("plain", "parity")):
        assert {c: row[c] for c in COLUMNS} == {c: cli[side]["summary"][k] for c, k in COLUMNS.items()}
    assert any(m.value.startswith(f"With {ref['n']:,} new tokens") for m in at.markdown)
    # cached in the session: a rerun shows the same table without the button
    at.run()
    again = next(d.value for d in at.dataframe if "auxiliary" in d.value.columns)
    assert again.equals(table)
    # another variant is another comparison: nothing shown until the button
    at.selectbox(key="ext-par-variant").set_value("window").run()
    assert not [d for d in at.dataframe if "auxiliary" in d.value.columns]


def test_parity_section_on_a_sentencepiece_base_says_why():
    at = _extend("llama-2", ["regen"])
    captions = [c.value for c in at.caption]
    assert any(c.startswith("Does not apply here") and "byte-level" in c for c in captions), captions
    with pytest.raises(KeyError):
        at.button(key="ext-par-run")


def test_parity_section_needs_a_naive_method():
    at = _extend("gpt2", ["continued"])
    with pytest.raises(KeyError):
        at.multiselect(key="ext-par-langs")
