"""The hub path, for real and offline: a pre-filled Hugging Face cache (HF_HUB_CACHE layout with blobs,
refs and snapshots) built in tmp_path from the shared assets, HF_HUB_OFFLINE=1, and load by id, by commit
hash and by branch; plus the hub errors (unknown id, no network, gated, private, bad revision)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time

import httpx2
import huggingface_hub
import pytest
from huggingface_hub import constants as hf_constants
from huggingface_hub import errors as hf_errors
from support import ROOT, TOKENIZERS

from analysis import TokenizerLoadError, load, load_hub
from analysis.tokenizer import hub

REPO = "toklab-test/tiny-tok"
MAIN = "1" * 40  # refs/main → gpt2 files
DEV = "2" * 40  # refs/dev → bert files
SPM = "3" * 40  # only reachable by hash → a SentencePiece tokenizer.model (llama-2)
EMPTY = "4" * 40  # refs/weights-only → no tokenizer files


def _add_snapshot(repo_dir, commit: str, files: dict[str, bytes]) -> None:
    """Store files like huggingface_hub does: content in blobs/<sha256>, symlinks in snapshots/<commit>/."""
    snap = repo_dir / "snapshots" / commit
    snap.mkdir(parents=True)
    for name, data in files.items():
        blob = repo_dir / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(exist_ok=True)
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, snap), snap / name)


def _read(name: str, *files: str) -> dict[str, bytes]:
    return {f: (TOKENIZERS / name / f).read_bytes() for f in files}


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """A Hugging Face hub cache with one repo at four revisions (files copied from the shared assets)."""
    cache = tmp_path_factory.mktemp("hf-cache")
    repo_dir = cache / ("models--" + REPO.replace("/", "--"))
    _add_snapshot(repo_dir, MAIN, _read("gpt2", "tokenizer.json", "tokenizer_config.json"))
    _add_snapshot(repo_dir, DEV, _read("bert-base-uncased", "tokenizer.json", "tokenizer_config.json"))
    _add_snapshot(repo_dir, SPM, _read("llama-2", "tokenizer.model"))
    _add_snapshot(repo_dir, EMPTY, {"config.json": b"{}"})
    (repo_dir / "refs").mkdir()
    for ref, commit in (("main", MAIN), ("dev", DEV), ("weights-only", EMPTY)):
        (repo_dir / "refs" / ref).write_text(commit)  # no trailing newline, as huggingface_hub writes it
    return cache


@pytest.fixture
def offline(monkeypatch, hub_cache):
    """HF_HUB_OFFLINE=1 and HF_HUB_CACHE=<the pre-filled cache>, set after huggingface_hub was imported."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache))
    monkeypatch.delenv("HF_HOME", raising=False)
    return hub_cache


def test_library_constants_are_frozen_at_import(offline):
    """huggingface_hub computed its constants at import: changing the environment later does not reach
    them, so analysis.tokenizer.sources must read the environment itself, at call time."""
    assert hf_constants.HF_HUB_CACHE != str(offline)
    assert hub.hub_cache_dir() == str(offline)
    assert hub.hub_offline() is True


def test_load_by_hub_id(offline):
    tok = load(REPO)
    assert tok.name == REPO and tok.source == f"hub:{REPO}"
    assert tok.model_type == "BPE" and tok.vocab_size == 50257 and tok.is_byte_level
    assert tok.config.get("model_max_length") == 1024  # tokenizer_config.json came along
    assert tok.tokenizer.encode("Hello world").tokens == ["Hello", "Ġworld"]


@pytest.mark.parametrize(
    "revision,model_type,vocab_size",
    [
        (MAIN, "BPE", 50257),
        ("main", "BPE", 50257),
        (DEV, "WordPiece", 30522),  # a commit hash
        ("dev", "WordPiece", 30522),  # a branch name in refs/
        (SPM, "BPE", 32000),  # tokenizer.model only: converted from SentencePiece
    ],
)
def test_load_by_revision(offline, revision, model_type, vocab_size):
    tok = load(REPO, revision=revision)
    assert tok.name == f"{REPO}@{revision}" and tok.source == f"hub:{REPO}@{revision}"
    assert tok.model_type == model_type and tok.vocab_size == vocab_size
    if revision == SPM:
        assert tok.byte_fallback and tok.tokenizer.encode("Hello", add_special_tokens=False).tokens == [
            "▁Hello"
        ]


def test_explicit_cache_dir(monkeypatch, hub_cache, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(TokenizerLoadError, match="not in the local Hugging Face cache"):
        load_hub(REPO)
    assert load_hub(REPO, revision="dev", cache_dir=hub_cache).model_type == "WordPiece"


def test_hf_home_fallback(monkeypatch, hub_cache, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    (tmp_path / "home").mkdir()
    os.symlink(hub_cache, tmp_path / "home" / "hub")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert load(REPO).vocab_size == 50257


@pytest.mark.parametrize("repo,revision", [("toklab-test/unknown", None), (REPO, "v9.9"), (REPO, "f" * 40)])
def test_unknown_id_or_revision_offline(offline, repo, revision):
    with pytest.raises(
        TokenizerLoadError, match=r"not in the local Hugging Face cache .* offline mode is on"
    ):
        load(repo, revision=revision)


def test_empty_cache_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(
        TokenizerLoadError, match=r"gpt2: not in the local Hugging Face cache .*HF_HUB_OFFLINE=1"
    ):
        load("gpt2")


def test_snapshot_without_tokenizer_files(offline):
    with pytest.raises(TokenizerLoadError, match="holds no tokenizer files"):
        load(REPO, revision="weights-only")


def test_invalid_hub_id():
    with pytest.raises(TokenizerLoadError, match="neither an existing path nor a valid hub id"):
        load_hub("not a/valid id!")
    with pytest.raises(TokenizerLoadError, match="no such file or folder"):
        load("owner/name/extra")


def test_no_network(monkeypatch, tmp_path):
    """Offline mode off, but nothing answers: the real download code fails fast and clearly."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hf_constants, "ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    attempts, waits = [], []
    connect = socket.create_connection
    monkeypatch.setattr(
        socket, "create_connection", lambda addr, *a, **k: attempts.append(addr) or connect(addr, *a, **k)
    )
    monkeypatch.setattr(time, "sleep", waits.append)
    with pytest.raises(TokenizerLoadError, match="hub cannot be reached .*no network"):
        load("toklab-test/not-cached")
    # fails fast: it did try the hub, and it gave up without a retry-with-backoff wait (no clock involved)
    assert attempts and all(a == ("127.0.0.1", 9) for a in attempts), attempts
    assert waits == []


def _response(status: int, url: str) -> httpx2.Response:
    return httpx2.Response(status, request=httpx2.Request("GET", url))


@pytest.mark.parametrize(
    "exc,token,match",
    [
        (hf_errors.GatedRepoError, None, "is gated: accept its license on the hub and give an access token"),
        (hf_errors.GatedRepoError, "hf_xxx", "is gated and this access token has no access"),
        (hf_errors.RepositoryNotFoundError, None, "no such repository on the hub"),
        (hf_errors.RevisionNotFoundError, None, "revision 'v2' does not exist"),
        (hf_errors.HfHubHTTPError, None, "the hub answered with an error"),
    ],
)
def test_hub_http_errors(monkeypatch, exc, token, match):
    status = {hf_errors.GatedRepoError: 403, hf_errors.RepositoryNotFoundError: 401}.get(exc, 404)
    status = 500 if exc is hf_errors.HfHubHTTPError else status
    calls = []

    def fake_snapshot_download(repo_id, **kw):
        calls.append((repo_id, kw))
        url = f"https://huggingface.co/api/models/{repo_id}/revision/{kw.get('revision') or 'main'}"
        raise exc(f"{status} Client Error for url {url}", response=_response(status, url))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    with pytest.raises(TokenizerLoadError, match=match):
        load("meta-llama/Llama-2-7b-hf", revision="v2", token=token)
    repo_id, kw = calls[0]
    assert repo_id == "meta-llama/Llama-2-7b-hf" and kw["revision"] == "v2" and kw["token"] == token
    assert "tokenizer.json" in kw["allow_patterns"] and "*.safetensors" not in kw["allow_patterns"]


# --------------------------------------------------------------------------------------------------
# the command line, through a subprocess with the environment variables
# --------------------------------------------------------------------------------------------------
def _cli(args: list[str], cache) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), PYTHONPATH=str(ROOT))
    env.pop("HF_HOME", None)
    return subprocess.run(
        [sys.executable, "-m", "analysis", "inspect", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
def test_cli_inspect_hub_id(hub_cache):
    r = _cli([REPO, "--json"], hub_cache)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["model_type"] == "BPE" and s["vocab_size"] == 50257 and s["merges"] == 50000
    assert s["added_tokens"] == 1 and s["ignore_merges"] is False and s["source"] == f"hub:{REPO}"
    r = _cli([REPO, "--revision", "dev", "--json"], hub_cache)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["model_type"] == "WordPiece" and s["merges"] == 0 and s["vocab_size"] == 30522


def test_cli_inspect_unknown_hub_id(hub_cache):
    r = _cli(["toklab-test/unknown", "--json"], hub_cache)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: toklab-test/unknown: not in the local Hugging Face cache")
    assert "Traceback" not in r.stderr
