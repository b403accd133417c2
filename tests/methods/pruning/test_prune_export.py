"""analysis.methods.pruning.report: the page's prune report is the CLI's, folders are written or refused clearly, zips."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from support import TOKENIZERS, load_shared

from analysis import DataError, load
from analysis.cli import main
from analysis.methods import pruning as P
from analysis.methods.pruning.report import prune_report, pruned_zip, write_pruned, zip_folder


@pytest.mark.slow
def test_report_is_the_clis_report(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["prune", "--tokenizer", str(TOKENIZERS / "llama-2"), "--order", "leaf-last-n", "--n", "100",
                 "--out", str(out), "--no-stt", "--no-robustness", "--json"]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    cli = json.loads((out / "prune_report.json").read_text(encoding="utf-8"))
    assert printed == cli  # one schema: what --json prints is the file the folder holds
    tok = load_shared("llama-2")
    res = P.prune_by_order(tok, P.compute_order(tok, "leaf-last-n"), 100)
    assert prune_report(tok, "leaf-last-n", res, out=out).to_json() == cli
    assert set(prune_report(tok, "leaf-last-n", res).to_json()) == set(cli) - {"out"}


@pytest.mark.slow
def test_write_zip_and_refusals(tmp_path):
    tok = load_shared("llama-2")
    res = P.prune_by_order(tok, P.compute_order(tok, "leaf-last-n"), 50)
    report = prune_report(tok, "leaf-last-n", res, stt=True)
    assert report.unreachable == report.unreachable_before == 0  # leaf orders never break reachability
    with zipfile.ZipFile(io.BytesIO(pruned_zip(res, report, "pruned"))) as zf:
        assert json.loads(zf.read("pruned/prune_report.json"))["removed"] == 50
    written = write_pruned(tok, res, tmp_path / "out", report)
    assert written.remap is None and "tokenizer.json" in written.files
    assert load(tmp_path / "out").vocab_size == 32000 - 50
    (tmp_path / "out" / ".env").write_text("SECRET=1")  # planted after the export: never in its zip
    with zipfile.ZipFile(io.BytesIO(zip_folder(tmp_path / "out", written.files))) as zf:
        assert sorted(zf.namelist()) == sorted(f"out/{f}" for f in written.files)
    with pytest.raises(DataError, match="not empty"):
        write_pruned(tok, res, tmp_path / "out", report)
    with pytest.raises(DataError, match="too large"):
        zip_folder(tmp_path / "out", max_bytes=10)
    (tmp_path / "file").write_text("x")
    with pytest.raises(DataError, match="cannot write"):
        write_pruned(tok, res, tmp_path / "file" / "sub", report)
