"""The equivalent commands the change pages show (analysis/commands/_equivalent.py): shared assets as
$TOKLAB_ASSETS/…, no server path when server paths are off, uploads and edits named with a note, and a shown line
parsed back into the CLI's argv. That the commands print the pages' numbers is tested in
tests/app/test_equivalent_commands.py and the pages' report tests."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from support import ASSETS, load_shared

from analysis.cli import build_parser
from analysis.commands._equivalent import (
    argv_of,
    dynamic_command,
    extend_command,
    model_check_command,
    tokenizer_arg,
    transplant_command,
)
from analysis.texts.corpora import Source


@pytest.fixture(autouse=True)
def _no_server_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    monkeypatch.setenv("TOKLAB_ASSETS", str(ASSETS))


def test_extend_command_names_files_without_the_server_layout(tmp_path: Path) -> None:
    gpt2 = load_shared("gpt2")
    corpus = ASSETS / "corpora" / "text" / "est_Latn.txt.gz"
    own = tmp_path / "secret dir" / "notes.txt"
    cmd = extend_command(gpt2, method="continued", n=100, max_chars=5_000_000, heldout_flores=["est_Latn"],
                         sources=[Source("flores-train", "est_Latn:800"), Source("file", str(corpus)),
                                  Source("file", str(own)), Source("bytes", "my text.txt", b"x")])  # fmt: skip
    line = cmd.text()
    assert line.startswith(
        "python -m analysis extend --tokenizer $TOKLAB_ASSETS/tokenizers/gpt2 --method continued"
    )
    assert "--text $TOKLAB_ASSETS/corpora/text/est_Latn.txt.gz" in line and "--max-chars 5000000" in line
    assert str(tmp_path) not in line and "--text notes.txt" in line and "--text 'my text.txt'" in line
    assert any("notes.txt" in n for n in cmd.notes) and any("you uploaded" in n for n in cmd.notes)
    argv = argv_of(line)
    assert argv[:3] == ["extend", "--tokenizer", str(ASSETS / "tokenizers" / "gpt2")]
    assert str(corpus) in argv and "my text.txt" in argv
    args = build_parser().parse_args(argv)  # the CLI takes every option the page wrote
    assert args.flores == ["est_Latn"] and args.max_chars == 5_000_000 and args.json


def test_a_server_path_is_shown_whole_only_when_the_operator_allows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "models" / "smol"
    tok = load_shared("gpt2")
    hidden = transplant_command(str(model), tok, init="omp", k=8, langs=["est_Latn"], lines=20)
    assert str(tmp_path) not in hidden.text() and "--model smol" in hidden.text() and hidden.notes
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    shown = transplant_command(str(model), tok, init="random", k=8)
    assert f"--model {model}" in shown.text() and "--k" not in shown.text()
    assert transplant_command("hub:org/model", tok, init="fvt").argv[:3] == [
        "transplant",
        "--model",
        "org/model",
    ]


def test_edits_and_uploads_are_named_with_a_note() -> None:
    edited = load_shared("gpt2").with_source(name="gpt2 +50", source="edited:")
    arg, note = tokenizer_arg(edited)
    assert arg == "gpt2_+50" and note and "download" in note
    arg, note = tokenizer_arg(load_shared("gpt2").with_source(name="mine", source="upload:mine.json"))
    assert arg == "mine.json" and note and "uploaded" in note


def test_dynamic_and_model_check_commands_parse() -> None:
    gpt2 = load_shared("gpt2")
    lines = ["Tallinn on pealinn.", "it's a 'quoted' line"]
    cmd = dynamic_command(gpt2, batch=lines, boundary="word", merges=5, target=12.0)
    argv = argv_of(cmd.text())
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--text"] == lines  # quoting survives the shell
    assert build_parser().parse_args(argv).target == 12.0
    long = dynamic_command(gpt2, batch=["x" * 3000], boundary="word", batch_size=4, seed=1)
    assert "--file batch.txt" in long.text() and long.notes
    mc = model_check_command("hub:org/model", langs=["est_Latn", "eng_Latn"], lines=20, inits=["fvt", "mean"])
    args = build_parser().parse_args(shlex.split(mc.text())[3:])
    assert (args.langs, args.lines, args.inits) == ("est_Latn,eng_Latn", 20, "fvt,mean")
