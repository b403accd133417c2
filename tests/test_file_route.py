"""The server's file route (`toklab_server.py`, `ui/file_route.py`) in a real server process: a workspace file is
streamed, byte for byte, only with a valid token of its own workspace (every refusal a bare 404), and a 200 MB
download does not grow the server's memory by the file's size."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from analysis.core.download_links import make_token
from analysis.core.workspace import WorkspaceStore

ROOT = Path(__file__).resolve().parent.parent
BIG_MB = 200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, WorkspaceStore, subprocess.Popen]]:
    """`streamlit run toklab_server.py` on a free port with a data folder of its own: (URL, store, process)."""
    data = tmp_path_factory.mktemp("data")
    port = _free_port()
    log = open(data.parent / "file-route-server.log", "w")
    env = {**os.environ, "TOKLAB_DATA": str(data)}
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "toklab_server.py"), "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "the server did not start: " + (data.parent / "file-route-server.log").read_text()
                )
            time.sleep(0.2)
        yield url, WorkspaceStore(data), proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _get(url: str) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def _token(store: WorkspaceStore, ws: str, name: str, **kw) -> str:
    return make_token(ws, "artifact", name, root=store.root, **kw)


@pytest.mark.slow
def test_a_file_is_streamed_only_with_a_valid_token_of_its_own_workspace(server, tmp_path):
    url, store, _ = server
    a, b = store.create(), store.create()
    body = os.urandom(300_000)  # several of the response's 64 KiB chunks
    (tmp_path / "m.gguf").write_bytes(body)
    store.put_file(a, "artifact", "smol/model.gguf", {"role": "model"}, tmp_path / "m.gguf")
    status, got, headers = _get(f"{url}/toklab/file/{_token(store, a, 'smol/model.gguf')}")
    assert status == 200 and got == body
    assert headers["content-disposition"] == 'attachment; filename="model.gguf"'
    assert headers["content-encoding"] == "identity"  # never gzipped by the server
    refused = [
        "/toklab/file/",
        "/toklab/file",
        "/toklab/file/nothing",
        f"/toklab/file/{_token(store, b, 'smol/model.gguf')}",  # B's token for the name A holds
        f"/toklab/file/{_token(store, a, 'smol/model.gguf').split('.')[0]}.AAAA",  # forged
        f"/toklab/file/{_token(store, a, 'smol/model.gguf', now=time.time() - 48 * 3600)}",  # expired
    ]
    answers = {_get(url + path)[:2] for path in refused}
    assert answers <= {(404, b"Not found")}, answers
    store.remove(a, "artifact", "smol/model.gguf")  # a link stops working with its item
    assert _get(f"{url}/toklab/file/{_token(store, a, 'smol/model.gguf')}")[0] == 404


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


@pytest.mark.slow
def test_a_large_download_does_not_sit_in_the_servers_memory(server, tmp_path):
    url, store, proc = server
    ws = store.create()
    big = tmp_path / "big.gguf"
    with big.open("wb") as f:  # sparse: 200 MB to read, almost nothing on disk
        f.truncate(BIG_MB << 20)
    store.put_file(ws, "artifact", "big.gguf", {}, big, move=True)
    before = _kib(proc.pid, "VmRSS")
    n = 0
    with urllib.request.urlopen(f"{url}/toklab/file/{_token(store, ws, 'big.gguf')}", timeout=120) as r:
        for chunk in iter(lambda: r.read(1 << 20), b""):
            assert not chunk.strip(b"\0")
            n += len(chunk)
    peak = _kib(proc.pid, "VmHWM")  # the most the server ever held, now including the whole download
    print(f"server RSS before {before / 1024:.1f} MB, peak after a {BIG_MB} MB download {peak / 1024:.1f} MB")
    assert n == BIG_MB << 20
    assert peak - before < 64 * 1024, (before, peak)  # the file is 200 MB; a copy in memory would show
