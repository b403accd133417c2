"""analysis/core/outputs.py: outputs get the permissions of any file the user creates (not tempfile's owner-only
modes), and one JSON text per result document."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from analysis.commands._common import print_json
from analysis.core.outputs import (
    atomic_folder,
    atomic_write_bytes,
    atomic_write_text,
    current_umask,
    file_mode,
    folder_mode,
    json_document,
)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture(params=[0o022, 0o077, 0o002])
def umask(request):
    """Run the test under this umask (restored afterwards)."""
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def test_umask_is_read_without_changing_it(umask):
    assert current_umask() == umask
    assert current_umask() == umask  # reading it left it as it was
    assert file_mode() == 0o666 & ~umask and folder_mode() == 0o777 & ~umask


def test_written_files_get_the_umask_mode(tmp_path, umask):
    f = atomic_write_bytes(tmp_path / "a.bin", b"x")
    assert _mode(f) == 0o666 & ~umask
    g = atomic_write_text(tmp_path / "b.json", "{}")
    assert _mode(g) == 0o666 & ~umask
    plain = tmp_path / "plain.txt"  # what open() gives under the same umask
    plain.write_text("x")
    assert _mode(g) == _mode(plain)


def test_a_replaced_file_keeps_its_mode(tmp_path, umask):
    f = tmp_path / "kept.json"
    f.write_text("old")
    f.chmod(0o640)
    atomic_write_text(f, "new")
    assert f.read_text() == "new" and _mode(f) == 0o640


def test_output_folders_get_the_umask_mode(tmp_path, umask):
    out = tmp_path / "export"
    with atomic_folder(out) as tmp:
        (tmp / "sub").mkdir()
        atomic_write_text(tmp / "sub" / "report.json", "{}")
        (tmp / "model.bin").write_bytes(b"\0")
    assert _mode(out) == 0o777 & ~umask  # tempfile.mkdtemp's 0700 is gone
    assert _mode(out / "sub") == 0o777 & ~umask
    assert _mode(out / "sub" / "report.json") == 0o666 & ~umask
    assert _mode(out / "model.bin") == 0o666 & ~umask
    with atomic_folder(out, replace=True) as tmp:
        (tmp / "x").write_text("y")
    assert _mode(out) == 0o777 & ~umask and [p.name for p in out.iterdir()] == ["x"]


def test_json_document_is_strict_and_nan_free():
    doc = {"a": float("nan"), "b": [1.5, float("inf")], "c": {"d": "é"}}
    text = json_document(doc)
    assert text.endswith("}\n") and "NaN" not in text and "Infinity" not in text and "é" in text
    assert json.loads(text) == {"a": None, "b": [1.5, None], "c": {"d": "é"}}


def test_json_document_is_what_the_cli_prints(capsys):
    doc = {"x": float("nan"), "y": [1, 2], "z": "ü"}
    print_json(doc)
    assert capsys.readouterr().out == json_document(doc)
