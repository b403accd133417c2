"""The workspace store (analysis.core.workspace): ids, isolation, quota, expiry, atomic files, the schema version,
and the operator command."""

from __future__ import annotations

import sqlite3
import time

import pytest

from analysis.cli import main
from analysis.core import workspace as wsm
from analysis.core.cache import store_dir
from analysis.core.workspace import QuotaError, WorkspaceStore, valid_id
from analysis.errors import DataError
from analysis.views.shared_text import LEGACY_NAMESPACE, remove_legacy_texts


@pytest.fixture
def store(tmp_path) -> WorkspaceStore:
    return WorkspaceStore(tmp_path / "data")


def test_ids_are_random_and_a_forged_or_missing_id_opens_a_fresh_workspace(store):
    a, restored = store.open(None)
    assert not restored and valid_id(a) and len(a) == 32
    assert store.open(a) == (a, True)
    forged = "A" * 32  # the form of an id, never issued
    for raw in (forged, "../../etc", "", a[:-1], a + "x"):
        fresh, restored = store.open(raw)
        assert not restored and fresh not in (raw, a) and valid_id(fresh)
    assert not store.exists(forged)  # a forged id is never adopted as a workspace name
    # the database holds only hashes of ids, never an id
    dump = "\n".join(sqlite3.connect(store.db).iterdump())
    assert a not in dump


def test_items_and_files_stay_in_their_workspace(store):
    a, b = store.create(), store.create()
    store.put(a, "library", "mine", {"kind": "upload"}, b"secret bytes")
    store.put_input(a, "pg-text", "typed by a")
    assert store.read(a, "library", "mine") == b"secret bytes"
    assert store.read(b, "library", "mine") is None and store.items(b, "library") == []
    assert store.inputs(b) == {} and store.inputs(a) == {"pg-text": "typed by a"}
    assert (
        store.usage(b).bytes == 0 and store.usage(a).items == 1
    )  # inputs are charged for bytes, not as items
    # the same file in b is stored once on disk but charged to each workspace
    store.put(b, "library", "copy", {"kind": "upload"}, b"secret bytes")
    assert len(list(store.blobs.glob("*/*"))) == 1
    assert store.usage(b).bytes >= len(b"secret bytes")
    store.delete(a)
    assert store.read(b, "library", "copy") == b"secret bytes"  # still named by b
    assert not store.exists(a) and store.read(a, "library", "mine") is None
    assert store.rename(b, "library", "copy", "renamed") and not store.rename(a, "library", "renamed", "x")
    assert store.read(b, "library", "renamed") == b"secret bytes" and store.get(b, "library", "copy") is None
    store.remove(b, "library", "renamed")
    assert list(store.blobs.glob("*/*")) == []  # the last name gone, the file goes
    with pytest.raises(DataError, match="no longer on the server"):
        store.put(a, "result", "x.json", {})  # a deleted workspace is never written again


def test_artifacts_are_written_from_files_and_read_in_place_only_from_their_workspace(
    store, tmp_path, monkeypatch
):
    a, b = store.create(), store.create()
    src = tmp_path / "model.gguf"
    src.write_bytes(b"G" * 3000)
    item = store.put_file(a, "artifact", "model.gguf", {"job": "j1"}, src)
    assert item.has_file and item.size >= 3000 and src.exists()  # copied, the source kept
    p = store.file_path(a, "artifact", "model.gguf")
    assert p is not None and p.read_bytes() == b"G" * 3000
    assert (
        store.file_path(b, "artifact", "model.gguf") is None
        and store.file_path("A" * 32, "artifact", "x") is None
    )
    moved = tmp_path / "folder.zip"
    moved.write_bytes(b"Z" * 10)
    store.put_file(a, "artifact", "folder.zip", {}, moved, move=True)
    assert not moved.exists() and store.read(a, "artifact", "folder.zip") == b"Z" * 10
    monkeypatch.setenv("TOKLAB_WORKSPACE_MAX_MB", str(4000 / 2**20))
    big = tmp_path / "big.bin"
    big.write_bytes(b"B" * 2000)
    with pytest.raises(QuotaError):
        store.put_file(a, "artifact", "big.bin", {}, big, move=True)
    assert big.exists() and store.get(a, "artifact", "big.bin") is None  # refused before anything moved
    with pytest.raises(DataError, match="not a file"):
        store.put_file(a, "artifact", "none", {}, tmp_path / "missing")
    store.delete(a)
    assert p is not None and not p.exists()  # the last name gone, the file goes


def test_the_quota_refuses_with_a_clear_message_and_writes_nothing(store, monkeypatch):
    monkeypatch.setenv("TOKLAB_WORKSPACE_MAX_ITEMS", "2")
    monkeypatch.setenv("TOKLAB_WORKSPACE_MAX_MB", str(1000 / 2**20))  # 1,000 bytes
    ws = store.create()
    store.put(ws, "result", "one.json", {}, b"x" * 100)
    store.put(ws, "result", "one.json", {}, b"y" * 600)  # a replacement is charged its difference
    with pytest.raises(QuotaError, match="workspace is full.*TOKLAB_WORKSPACE_MAX_MB"):
        store.put(ws, "result", "two.json", {}, b"z" * 500)
    store.put(ws, "result", "two.json", {}, b"z" * 10)
    with pytest.raises(QuotaError, match="TOKLAB_WORKSPACE_MAX_ITEMS"):
        store.share(ws, b"three")
    assert [i.name for i in store.items(ws, "result")] == ["one.json", "two.json"]
    assert store.usage(ws).items == 2 and "2 of 2 items" in store.usage(ws).describe()


def test_idle_workspaces_expire_and_prune_removes_them(store, monkeypatch):
    old, fresh, empty = store.create(), store.create(), store.create()
    store.put(old, "result", "r.json", {}, b"old result")
    store.put(fresh, "result", "r.json", {}, b"fresh result")
    with store._tx() as c:  # make `old` 10 days idle and `empty` 2 days idle
        c.execute("UPDATE workspaces SET used = ? WHERE key = ?", (time.time() - 10 * 86400, wsm._key(old)))
        c.execute("UPDATE workspaces SET used = ? WHERE key = ?", (time.time() - 2 * 86400, wsm._key(empty)))
    monkeypatch.setenv("TOKLAB_WORKSPACE_IDLE_DAYS", "7")
    assert not store.exists(old) and store.exists(fresh)
    assert len(store.prune(dry_run=True)) == 2 and len(store.list()) == 3
    gone = store.prune()
    assert len(gone) == 2 and [w.items for w in store.list()] == [1]
    assert store.read(fresh, "result", "r.json") == b"fresh result"
    assert len(list(store.blobs.glob("*/*"))) == 1
    reopened, restored = store.open(old)
    assert not restored and reopened != old


def test_shares_carry_a_random_id_and_go_with_their_workspace(store):
    ws = store.create()
    s1, s2 = store.share(ws, b"same text"), store.share(ws, b"same text")
    assert s1 != s2 and store.read_share(s1) == b"same text"  # random ids, not the content's hash
    assert store.read_share("x" * 22) is None and store.read_share("../x") is None
    store.delete(ws)
    assert store.read_share(s1) is None


def test_files_are_written_atomically_and_a_failed_write_leaves_nothing(store, monkeypatch):
    ws = store.create()

    def full(path, data):
        raise DataError(f"cannot write {path}: No space left on device")

    monkeypatch.setattr(wsm, "atomic_write_bytes", full)
    with pytest.raises(DataError, match="No space left"):
        store.put(ws, "library", "big", {}, b"data")
    assert store.items(ws, "library") == []  # the row was rolled back with the failed file
    monkeypatch.undo()
    store.put(ws, "library", "big", {}, b"data")
    assert [p.name for p in store.blobs.glob("*/*") if p.name.startswith(".")] == []  # no temporary left over


def test_the_schema_is_versioned_and_a_newer_store_is_refused(tmp_path):
    store = WorkspaceStore(tmp_path / "d")
    assert store.schema_version() == wsm.SCHEMA_VERSION
    assert sqlite3.connect(store.db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with sqlite3.connect(store.db) as c:
        c.execute("UPDATE schema_version SET version = 99")
    wsm._MIGRATED.clear()
    with pytest.raises(DataError, match="newer Tokenizer Lab"):
        WorkspaceStore(tmp_path / "d")


def test_the_operator_command_lists_sizes_and_prunes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOKLAB_DATA", str(tmp_path / "ops"))
    store = wsm.default_store()
    ws = store.create()
    store.put(ws, "result", "r.json", {}, b"{}")
    assert main(["workspaces", "list"]) == 0
    assert ws not in capsys.readouterr().out  # the operator sees key prefixes, never ids
    assert main(["workspaces", "size", "--json"]) == 0 and '"workspaces": 1' in capsys.readouterr().out
    assert main(["workspaces", "prune", "--idle-days", "0"]) == 0
    assert "removed 1 workspace" in capsys.readouterr().out and store.list() == []
    assert main(["workspaces", "prune", "--idle-days", "-1"]) == 2
    assert "error: --idle-days" in capsys.readouterr().err


def test_texts_kept_under_their_hash_by_earlier_versions_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    old = store_dir() / LEGACY_NAMESPACE / "0123456789abcdef.json"
    old.parent.mkdir(parents=True)
    old.write_text('{"data": "a typed text"}')
    assert remove_legacy_texts() and not old.parent.exists()
    assert not remove_legacy_texts()
