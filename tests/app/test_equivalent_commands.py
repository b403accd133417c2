"""Every change page shows the command line that reproduces its result, and that command, run through
`analysis.cli.main` in this process, prints the page's numbers exactly (same tokens, same bytes/token)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_support import open_page
from streamlit.testing.v1 import AppTest
from support import load_shared

from analysis.cli import main
from analysis.commands._equivalent import argv_of
from analysis.methods.extension import METHOD_LABELS


def _commands(at: AppTest) -> list[str]:
    """The lines of the bash code blocks the page shows (each a `python -m analysis …` command)."""
    blocks = [c.value for c in at.code if c.language == "bash"]
    return [line for b in blocks for line in b.splitlines() if line.startswith("python -m analysis ")]


def _cli(command: str, capsys: pytest.CaptureFixture[str]) -> dict:
    """Run a shown command in this process; its JSON document."""
    capsys.readouterr()
    assert main(argv_of(command)) == 0
    return json.loads(capsys.readouterr().out)


def _with_tokenizer(at: AppTest, name: str) -> None:
    at.session_state["toklab_library"] = {**at.session_state["toklab_library"], name: load_shared(name)}
    at.run()


@pytest.mark.slow
def test_extend_command_reproduces_the_page(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Extend (gpt2, FLORES est_Latn + part of the shared corpus, N = 150, continued and regen): the command names
    the shared corpus by $TOKLAB_ASSETS and the page's budget, and prints the page's held-out bytes/token."""
    monkeypatch.setenv("TOKLAB_PATHOLOGICAL_KB", "16")  # both sides time robustness on small inputs: cheaper
    at = open_page("pages/extend.py")
    _with_tokenizer(at, "gpt2")
    at.selectbox(key="ext-tok").set_value("gpt2").run()
    at.number_input(key="ext-budget").set_value(120_000).run()  # FLORES lines and a little of the corpus
    at.number_input(key="ext-nmax").set_value(150).run()
    at.button(key="ext-train").click().run()
    assert not at.exception and not at.error
    lines = _commands(at)
    assert len(lines) == 2, lines  # one per method
    assert all(
        "$TOKLAB_ASSETS/corpora/text/est_Latn.txt.gz" in x and "--max-chars 120000" in x for x in lines
    )
    assert "/work/" not in "".join(lines) and "--heldout-flores eng_Latn" in lines[0]
    table = at.dataframe[0].value.set_index("text")
    added = at.dataframe[1].value.set_index("method")["added"]
    at.button(key="ext-build").click().run()  # the export: the page's extension_report.json (continued)
    page_doc = json.loads(at.session_state["ext-zip"][4])
    for line, method in zip(lines, ("continued", "regen")):
        assert f"--method {method} --n 150" in line
        doc = _cli(line, capsys)
        assert doc["added"] == added[METHOD_LABELS[method]]
        for text, h in doc["heldout"].items():
            assert h["bytes_per_token_after"] == table.loc[text, method], (method, text)
            assert h["bytes_per_token_before"] == table.loc[text, "before"]
        if method == "continued":
            assert doc["heldout"] == page_doc["heldout"]
            assert doc["added"] == page_doc["added"] == 150


@pytest.mark.slow
def test_prune_command_reproduces_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Prune (gpt2, the default leaf-frequency order on the est_Latn + eng_Latn FLORES mix, N = 300): the command's
    --flores mix prunes the same tokens (same vocabulary and merges) with the page's held-out bytes/token."""
    monkeypatch.chdir(tmp_path)  # the command writes its --out folder here
    at = open_page("pages/prune.py")
    _with_tokenizer(at, "gpt2")
    at.selectbox(key="prune-tok").set_value("gpt2").run()
    at.number_input(key="prune-n").set_value(300).run()
    for b in (b for b in at.button if b.key == "prune-go"):  # shown above 100k tokens only
        b.click().run()
    assert not at.exception and not at.error
    (line,) = _commands(at)
    assert "--order leaf-frequency --n 300 --flores est_Latn --flores eng_Latn --flores-lines 800" in line
    assert line.endswith("--no-robustness --json")  # the page measures robustness on request
    doc = _cli(line, capsys)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Vocabulary"] == f"{doc['vocab_size']:,}" and metrics["Merges"] == f"{doc['merges']:,}"
    h = doc["heldout"]["est_Latn"]
    assert metrics["bytes/token (est_Latn)"] == f"{h['bytes_per_token_after']:.3f}"
    assert h["bytes_per_token_after"] != h["bytes_per_token_before"]
