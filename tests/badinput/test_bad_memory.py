"""Peak memory of the CLI on the inputs that cost 2.3–8 GB or ran for minutes before the fixes, measured in a
fresh interpreter (`resource.getrusage`): every run stays under `PEAK_MB_BOUND`.

The worst case is printed (`pytest -s`) so that the closing note can state it.
"""

from __future__ import annotations

import json

import pytest
from bad_files import one_line_bomb_gz, one_line_bomb_zip, sparse_ids_doc, understated, write_folder, zip_of
from bad_run import PEAK_MB_BOUND, assert_clear_error
from support import TOKENIZERS

GPT2 = TOKENIZERS / "gpt2"
PEAKS: dict[str, int] = {}


def _bounded(name: str, run) -> None:
    assert run.peak_mb is not None, run.err[-2000:]
    PEAKS[name] = run.peak_mb
    print(f"\npeak {name}: {run.peak_mb} MB")
    assert run.peak_mb < PEAK_MB_BOUND, (name, run.peak_mb)


def test_baseline(cli_process):
    run = cli_process("inspect", GPT2)
    assert run.rc == 0, run.err
    _bounded("baseline: inspect gpt2", run)


def test_sparse_ids_prune(cli_process, tmp_path):
    folder = write_folder(tmp_path / "sparse", sparse_ids_doc())
    run = cli_process(
        "prune", "--tokenizer", folder, "--order", "last-n", "--n", "1", "--out", tmp_path / "o"
    )
    assert_clear_error(run, "not dense")
    _bounded("sparse ids (prune)", run)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["zip", "gz"])
def test_one_line_bomb_with_a_budget(cli_process, tmp_path, kind):
    """100 MB in one line, compressed to about 100 kB: the budget applies inside the line."""
    path = tmp_path / f"bomb.txt.{kind}"
    (one_line_bomb_zip if kind == "zip" else one_line_bomb_gz)(path, 100)
    assert path.stat().st_size < 1_000_000
    run = cli_process(
        "extend", "--tokenizer", GPT2, "--text", path, "--max-chars", "20000", "--n", "5", "--json"
    )
    assert run.rc == 0, run.err[-2000:]
    assert json.loads(run.out)["text_chars"] == 20000
    _bounded(f"100 MB one-line {kind} with a 20,000-character budget (extend)", run)


@pytest.mark.parametrize("kind", ["zip", "gz"])
def test_one_line_bomb_without_a_budget(cli_process, tmp_path, kind):
    path = tmp_path / f"bomb.txt.{kind}"
    (one_line_bomb_zip if kind == "zip" else one_line_bomb_gz)(path, 40)
    run = cli_process(
        "extend", "--tokenizer", GPT2, "--text", path, "--n", "5", env={"TOKLAB_MAX_TEXT_MB": "4"}
    )
    assert_clear_error(run, "more than 4 MB of text")
    _bounded(f"40 MB one-line {kind} without a budget (extend, 4 MB text cap)", run)


def test_huge_tokenizer_json_in_a_folder(cli_process, tmp_path):
    (tmp_path / "tok").mkdir()
    with open(tmp_path / "tok" / "tokenizer.json", "wb") as fh:
        fh.truncate(2_500_000_000)
    run = cli_process("inspect", tmp_path / "tok")
    assert_clear_error(run, "over the 200 MB limit")
    _bounded("2.5 GB tokenizer.json through a folder (inspect)", run)


@pytest.mark.slow
def test_zip_understating_its_sizes(cli_process, tmp_path):
    gpt2 = (GPT2 / "tokenizer.json").read_bytes()
    data = understated(zip_of({"tok/tokenizer.json": gpt2, "tok/padding.bin": b"\0" * (300 << 20)}))
    (tmp_path / "lying.zip").write_bytes(data)
    run = cli_process("inspect", tmp_path / "lying.zip")
    assert_clear_error(run, "corrupt")
    _bounded("zip whose headers understate 300 MB (inspect)", run)


def test_dynamic_on_a_10mb_line(cli_process, tmp_path):
    (tmp_path / "line.txt").write_text("abcdefghij" * 1_000_000, encoding="utf-8")
    run = cli_process("dynamic", GPT2, "--file", tmp_path / "line.txt")
    assert_clear_error(run, "per example")
    _bounded("10 MB line without spaces (dynamic)", run)
