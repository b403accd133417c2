"""A FIFO (or socket) as every kind of input: refused before anything opens it, with one message everywhere
(`analysis.core.inputs.check_not_special`), never a reader blocked forever waiting for a writer.

A reader that regressed would block in `open()`; each in-process case runs in a thread, and when it is still
waiting after its time the test opens the FIFO for writing (which releases the reader) and fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, TOKENIZERS

from analysis import DataError, load
from analysis.core.inputs import check_not_special, read_file
from analysis.methods.reuse.target import wordfreq_texts
from analysis.model.source import resolve_model
from analysis.texts import flores as fl
from analysis.texts.code import read_code
from analysis.texts.corpora import from_paths, iter_file
from analysis.texts.shards import resolve

MESSAGE = "not a regular file or a folder of files"
GPT2 = TOKENIZERS / "gpt2"


@pytest.fixture
def fifo(tmp_path) -> Path:
    p = tmp_path / "pipe.txt"
    os.mkfifo(p)
    return p


def _refused_without_blocking(fifo: Path, fn: Callable[[], Any]) -> str:
    """Run `fn` in a thread; returns the message of the error it raised (fails if it blocked or succeeded)."""
    got: list[BaseException | None] = []

    def target() -> None:
        try:
            fn()
            got.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            got.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout=60)
    if t.is_alive():  # blocked in open(): release it so the test run goes on, then fail
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        t.join(timeout=60)
        pytest.fail(f"{fn} blocked on the FIFO")
    assert got and got[0] is not None, "the FIFO was accepted"
    return str(got[0])


READERS: dict[str, Callable[[Path], Any]] = {
    "read_file": read_file,
    "tokenizer path": load,
    "tokenizer gguf": lambda p: load(p.rename(p.with_suffix(".gguf"))),
    "model path": resolve_model,
    "text file": lambda p: list(iter_file(p)),
    "training paths": lambda p: from_paths([p]),
    "corpus shards": lambda p: resolve([str(p)]),
    "corpus glob": lambda p: resolve([str(p.parent / "*.txt")]),
    "corpus folder": lambda p: resolve([str(p.parent)]),
    "FLORES path": lambda p: fl.open_flores(p),
    "code corpus": lambda p: read_code([p.rename(p.with_name("x.jsonl"))]),
    "code corpus folder": lambda p: read_code([p.rename(p.with_name("x.jsonl")).parent]),
    "word list": lambda p: list(wordfreq_texts(p)),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_a_fifo_is_refused_by_every_reader(fifo, reader):
    msg = _refused_without_blocking(fifo, lambda: READERS[reader](fifo))
    assert "FIFO" in msg and MESSAGE in msg, msg


def test_a_socket_is_refused_and_regular_files_and_folders_pass(tmp_path):
    sock = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock))
        with pytest.raises(DataError, match=f"a socket, {MESSAGE}"):
            check_not_special(sock)
    (tmp_path / "a.txt").write_text("a")
    assert check_not_special(tmp_path / "a.txt") == tmp_path / "a.txt"
    assert check_not_special(tmp_path) == tmp_path
    assert check_not_special(tmp_path / "missing") == tmp_path / "missing"  # the caller says "not found"
    if Path("/dev/zero").exists():
        with pytest.raises(DataError, match=f"a device, {MESSAGE}"):
            read_file("/dev/zero")


@pytest.mark.parametrize(
    "argv",
    [
        ["stt", str(GPT2), "--corpus", "{p}"],
        ["extend", "--tokenizer", str(GPT2), "--text", "{p}", "--n", "5"],
        ["dynamic", str(GPT2), "--file", "{p}"],
        ["inspect", "{p}"],
    ],
    ids=["stt-corpus", "extend-text", "dynamic-file", "inspect"],
)
def test_cli_refuses_a_fifo_with_a_clear_error(fifo, argv):
    r = subprocess.run(
        [sys.executable, "-m", "analysis", *(a.format(p=fifo) for a in argv)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert (
        r.stderr.strip().splitlines()[-1]
        == f"error: cannot read {fifo}: it is a FIFO (named pipe), {MESSAGE}"
    )
