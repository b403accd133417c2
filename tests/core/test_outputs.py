"""analysis/core/outputs.py: outputs get the permissions of any file the user creates (not tempfile's owner-only
modes), and one JSON text per result document."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, TOKENIZERS

from analysis import DataError
from analysis.commands._common import print_json
from analysis.core.outputs import (
    atomic_folder,
    atomic_write_bytes,
    atomic_write_file,
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


# ------------------------------------------------------------------------------ targets that are not regular files
def _stt_csv(target: Path) -> subprocess.CompletedProcess:
    """`python -m analysis stt gpt2 --csv TARGET` in a fresh interpreter (stderr captured)."""
    return subprocess.run(
        [sys.executable, "-m", "analysis", "stt", str(TOKENIZERS / "gpt2"), "--csv", str(target)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_csv_to_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    real = tmp_path / "data" / "results.csv"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "out.csv"
    link.symlink_to(real)
    r = _stt_csv(link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text(encoding="utf-8").startswith("id,")
    assert sorted(p.name for p in real.parent.iterdir()) == ["results.csv"]  # no temporary left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out.csv"]


def test_a_dangling_symlink_creates_the_file_it_names(tmp_path):
    link = tmp_path / "out.csv"
    link.symlink_to(tmp_path / "new.csv")
    atomic_write_text(link, "a,b\n")
    assert link.is_symlink() and (tmp_path / "new.csv").read_text() == "a,b\n"


@pytest.mark.skipif(not Path("/dev/null").is_char_device(), reason="no /dev/null")
def test_csv_to_dev_null_is_written_through():
    r = _stt_csv(Path("/dev/null"))
    assert r.returncode == 0, r.stderr
    assert Path("/dev/null").is_char_device()


@pytest.mark.skipif(not Path("/dev/full").is_char_device(), reason="no /dev/full")
def test_csv_to_dev_full_is_a_clear_no_space_error_and_the_device_stays():
    r = _stt_csv(Path("/dev/full"))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("error: ") and "No space left" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert Path("/dev/full").is_char_device()
    with pytest.raises(DataError, match="No space left"):
        atomic_write_bytes("/dev/full", b"x")
    assert Path("/dev/full").is_char_device()


def test_a_fifo_is_written_into_never_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="nothing is reading it"):  # no reader: an error, not a wait
        atomic_write_text(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader waiting (opening it does not block)
    try:
        atomic_write_text(fifo, "a,b\n")
        assert os.read(reader, 100) == b"a,b\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_socket_or_folder_is_refused(tmp_path):
    with pytest.raises(DataError, match="it is a folder"):
        atomic_write_text(tmp_path, "x")
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock_path))
        with pytest.raises(DataError, match="socket"):
            atomic_write_text(sock_path, "x")
    assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)


def test_output_folder_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with atomic_folder(link) as tmp:
        (tmp / "a.txt").write_text("a")
    assert link.is_symlink() and (real / "a.txt").read_text() == "a"


def test_a_streamed_file_is_written_atomically_and_never_replaces_a_special_file(tmp_path):
    """atomic_write_file (what the GGUF writer goes through): the target appears whole or not at all, a symlink
    keeps its link, and a FIFO is refused, not replaced."""
    out = tmp_path / "model.gguf"
    atomic_write_file(out, lambda tmp: tmp.write_bytes(b"GGUF" + b"x" * 100))
    assert out.read_bytes() == b"GGUF" + b"x" * 100

    def fails(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(DataError, match="No space left"):
        atomic_write_file(out, fails)
    assert out.read_bytes() == b"GGUF" + b"x" * 100 and sorted(tmp_path.iterdir()) == [out]
    link = tmp_path / "link.gguf"
    link.symlink_to(out)
    atomic_write_file(link, lambda tmp: tmp.write_bytes(b"new"))
    assert link.is_symlink() and out.read_bytes() == b"new"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="FIFO"):
        atomic_write_file(fifo, lambda tmp: tmp.write_bytes(b"x"))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
