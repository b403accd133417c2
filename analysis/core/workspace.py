"""Workspaces: a browser's work kept on the server, named by an unguessable id, so that a reload, a bookmark,
another tab or a restarted server brings it back.

A workspace id is ``secrets.token_urlsafe(24)`` (192 random bits, 32 URL-safe characters). The store keeps only the
SHA-256 of each id (its *key*), so a copy of the database does not hand out working ids. Opening a missing,
expired or malformed id gives a *fresh* workspace with a new id — never one named by the caller — and answers the
same way in every case, so no caller learns whether another workspace exists.

What a workspace holds is a list of *items* ``(kind, name) → meta`` (a small JSON object), optionally with a file:

* ``library``: a tokenizer of the sidebar library (an example or hub id by reference, an upload's original bytes, an
  edit as a one-entry library zip),
* ``input``: a page input a user must not lose (the Playground's text, picked tokenizers, a page's settings),
* ``result``: a finished result's JSON document (what the page offers as a JSON download),
* ``artifact``: a file a job or a page made for download (an edited model's folder as a zip, a ``.gguf``), or a
  model a user uploaded; written from a file on disk (:meth:`WorkspaceStore.put_file`, never whole in memory) and
  read by path (:meth:`WorkspaceStore.file_path`) by workers and the streamed download route.

Files are stored once per content (``<data>/blobs/ab/<sha256>``, written atomically through
:mod:`analysis.core.outputs`) and removed when no item or share names them any more; each workspace is charged
for the bytes of every item it holds (a file shared by two workspaces counts in both, so usage reveals nothing
about anyone else). A file's *unpacked folder* (an uploaded model: :mod:`analysis.core.workspace_unpacked`) is
part of its storage: charged, removed with it, pruned once no item names it. *Shares* are texts a user asked a
share link for: they carry a random id of their own (not a content hash), belong to the workspace that made them
and go when it goes.

The database is SQLite in WAL mode (readers never wait for the writer) with a ``schema_version`` table and an
ordered list of migrations (:data:`MIGRATIONS`): a store made by an older version is brought up to date when first
opened, one written by a newer version is refused. Quotas (bytes, items) and idle expiry come from
:mod:`analysis.core.paths` (``TOKLAB_WORKSPACE_MAX_MB``, ``TOKLAB_WORKSPACE_MAX_ITEMS``,
``TOKLAB_WORKSPACE_IDLE_DAYS``); ``python -m analysis workspaces list|size|prune`` is the operator's view.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.core import paths, sqlite_db
from analysis.core import workspace_unpacked as unpacked
from analysis.core.cache import memoize
from analysis.core.inputs import human_size
from analysis.core.outputs import atomic_write_bytes, atomic_write_file
from analysis.errors import DataError

#: The schema this code writes; :data:`MIGRATIONS` takes a store from any earlier version to it.
SCHEMA_VERSION = 1
#: ``MIGRATIONS[v]`` takes the schema from version ``v`` to ``v + 1`` (statements separated by ``;``, run in one
#: transaction). Version 0 is an empty database.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE workspaces (key TEXT PRIMARY KEY, created REAL NOT NULL, used REAL NOT NULL);
    CREATE TABLE items (
        ws TEXT NOT NULL REFERENCES workspaces(key) ON DELETE CASCADE,
        kind TEXT NOT NULL, name TEXT NOT NULL, meta TEXT NOT NULL, blob TEXT,
        size INTEGER NOT NULL, seq INTEGER NOT NULL, updated REAL NOT NULL,
        PRIMARY KEY (ws, kind, name));
    CREATE INDEX items_blob ON items(blob);
    CREATE TABLE shares (
        key TEXT PRIMARY KEY, ws TEXT NOT NULL REFERENCES workspaces(key) ON DELETE CASCADE,
        blob TEXT NOT NULL, size INTEGER NOT NULL, created REAL NOT NULL);
    CREATE INDEX shares_ws ON shares(ws);
    CREATE INDEX shares_blob ON shares(blob)
    """,
)
#: The databases migrated in this process (shared with the job store; a test that stands for a restart clears it).
_MIGRATED = sqlite_db.MIGRATED
#: The kinds of item a workspace holds; ``input`` items are charged for their bytes, not as items.
KINDS = ("library", "input", "result", "artifact")
#: The database file inside the data folder.
DB_NAME = "workspaces.sqlite3"
#: Random bytes of a workspace id and of a share id.
ID_BYTES = 24
SHARE_BYTES = 16
#: A workspace that never held anything is removed after this many days without use.
EMPTY_IDLE_DAYS = 1.0
_ID = re.compile(r"[A-Za-z0-9_-]{32}")
_SHARE = re.compile(r"[A-Za-z0-9_-]{22}")
_DAY = 86400.0


class QuotaError(DataError):
    """The workspace would exceed its quota (bytes or items); nothing was written."""


@dataclass(frozen=True)
class Item:
    """One item of a workspace: its kind and name, its JSON metadata, the bytes it is charged for, whether it has
    a file, and when it was last written (Unix time)."""

    kind: str
    name: str
    meta: dict[str, Any]
    size: int
    has_file: bool
    updated: float


@dataclass(frozen=True)
class Usage:
    """What a workspace holds against its quota."""

    bytes: int
    items: int
    max_bytes: int
    max_items: int

    def describe(self) -> str:
        """One line for a user: items and bytes used of the quota."""
        return (f"{self.items:,} of {self.max_items:,} items · {human_size(self.bytes)} of "
                f"{human_size(self.max_bytes)}")  # fmt: skip


@dataclass(frozen=True)
class WorkspaceInfo:
    """The operator's view of one workspace: a short prefix of its key (never its id), times and usage."""

    key: str
    created: float
    used: float
    items: int
    bytes: int

    def to_json(self) -> dict[str, Any]:
        """A JSON object for `python -m analysis workspaces --json`."""
        return {"key": self.key, "created": self.created, "used": self.used, "items": self.items,
                "bytes": self.bytes}  # fmt: skip


def new_id() -> str:
    """A fresh workspace id: 192 random bits, URL-safe."""
    return secrets.token_urlsafe(ID_BYTES)


def valid_id(raw: object) -> bool:
    """Whether `raw` has the form of a workspace id (says nothing about whether it exists)."""
    return isinstance(raw, str) and bool(_ID.fullmatch(raw))


def _key(ws_id: str) -> str:
    return hashlib.sha256(ws_id.encode("ascii")).hexdigest()


def _meta_text(meta: dict[str, Any]) -> str:
    try:
        return json.dumps(meta, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise DataError(f"a workspace item must be plain JSON: {e}") from None


class WorkspaceStore:
    """The workspaces under one data folder (default :func:`analysis.core.paths.data_dir`)."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else paths.data_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        self.db = self.root / DB_NAME
        self.blobs = self.root / "blobs"
        self.unpacked = self.root / unpacked.UNPACKED
        self._migrate()
        # one connection held open for the store's life: SQLite checkpoints the WAL (and syncs the database) when
        # its last connection closes, which each short-lived connection below would otherwise be (15 ms a write)
        self._anchor = self._connect()

    # ------------------------------------------------------------------ database
    def _connect(self) -> sqlite3.Connection:
        c = sqlite3.connect(self.db, timeout=60, isolation_level=None)
        c.execute("PRAGMA foreign_keys = ON")
        c.execute("PRAGMA synchronous = NORMAL")
        return c

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (taken at once, so two writers never interleave a check and a write)."""
        with sqlite_db.transaction(self._connect) as c:
            yield c

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return sqlite_db.read(self._connect, sql, args)

    def schema_version(self) -> int:
        """The schema version the database is at (0: empty)."""
        with closing(self._connect()) as c:
            return sqlite_db.schema_version(c)

    def _migrate(self) -> None:
        """Bring the database to :data:`SCHEMA_VERSION` (once per process and file); refuse a newer one."""
        sqlite_db.migrate(self.db, self._connect, MIGRATIONS, SCHEMA_VERSION, "workspace store")

    # ------------------------------------------------------------------ workspaces
    def create(self) -> str:
        """A new, empty workspace; its id."""
        ws_id, now = new_id(), time.time()
        with self._tx() as c:
            c.execute("INSERT INTO workspaces VALUES (?, ?, ?)", (_key(ws_id), now, now))
        return ws_id

    def exists(self, ws_id: str) -> bool:
        """Whether `ws_id` names a workspace of this store that has not expired."""
        if not valid_id(ws_id):
            return False
        rows = self._read("SELECT used FROM workspaces WHERE key = ?", (_key(ws_id),))
        return bool(rows) and rows[0][0] >= time.time() - paths.workspace_idle_days() * _DAY

    def open(self, raw: str | None) -> tuple[str, bool]:
        """The workspace a link names: ``(id, True)`` when `raw` is a live workspace's id (its use time is
        renewed), else ``(a fresh id, False)`` — the same answer for a missing, expired, forged or malformed id."""
        if raw is not None and self.exists(raw):
            with self._tx() as c:
                c.execute("UPDATE workspaces SET used = ? WHERE key = ?", (time.time(), _key(raw)))
            return raw, True
        if valid_id(raw):  # expired: its items go now, not at the next prune
            self.delete(raw)  # type: ignore[arg-type]
        return self.create(), False

    def delete(self, ws_id: str) -> None:
        """Remove a workspace, its items, its shares and the files no other workspace holds."""
        if not valid_id(ws_id):
            return
        with self._tx() as c:
            blobs = _blobs_of(c, _key(ws_id))
            c.execute("DELETE FROM workspaces WHERE key = ?", (_key(ws_id),))
            self._drop_unused(c, blobs)

    def _ws(self, c: sqlite3.Connection, ws_id: str) -> str:
        """The key of a live workspace (a DataError for any other id: a page never writes to a workspace that
        is not there)."""
        if valid_id(ws_id):
            key = _key(ws_id)
            if c.execute("SELECT 1 FROM workspaces WHERE key = ?", (key,)).fetchone():
                return key
        raise DataError("this workspace is no longer on the server: reload the page to open a new one")

    # ------------------------------------------------------------------ items
    def put(self, ws_id: str, kind: str, name: str, meta: dict[str, Any], data: bytes | None = None) -> None:
        """Write an item (replacing one of the same kind and name), with an optional file; QuotaError when the
        workspace would go over its quota (nothing is written then)."""
        if kind not in KINDS:
            raise ValueError(f"unknown workspace item kind {kind!r}")
        if not isinstance(name, str) or not name or len(name) > 300:
            raise DataError("a workspace item needs a name of 1 to 300 characters")
        text = _meta_text(meta)
        size = len(text.encode("utf-8")) + (len(data) if data is not None else 0)
        digest = hashlib.sha256(data).hexdigest() if data is not None else None
        with self._tx() as c:
            key = self._ws(c, ws_id)
            old = c.execute("SELECT size, blob, seq FROM items WHERE ws = ? AND kind = ? AND name = ?",
                            (key, kind, name)).fetchone()  # fmt: skip
            counted = kind != "input" and old is None
            self._check_quota(c, key, size - (old[0] if old else 0), int(counted))
            if digest is not None:
                self._write_blob(digest, data)  # type: ignore[arg-type]
            seq = old[2] if old else (c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM items WHERE ws = ?",
                                                (key,)).fetchone()[0])  # fmt: skip
            c.execute("INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      (key, kind, name, text, digest, size, seq, time.time()))  # fmt: skip
            c.execute("UPDATE workspaces SET used = ? WHERE key = ?", (time.time(), key))
            if old and old[1] and old[1] != digest:
                self._drop_unused(c, {old[1]})

    def put_file(
        self, ws_id: str, kind: str, name: str, meta: dict[str, Any], src: str | Path, *, move: bool = False
    ) -> Item:
        """Write an item whose file is the file `src` on disk (replacing one of the same kind and name), hashed
        and copied in chunks (or moved, with `move`, when it is on the same file system), so a model of several
        GB never sits in memory; QuotaError before anything is copied when the workspace would go over its quota.
        The item is charged for the file and for the file's unpacked folder when there is one
        (:meth:`unpacked_path`; unpack before storing). Returns the item."""
        if kind not in KINDS:
            raise ValueError(f"unknown workspace item kind {kind!r}")
        if not isinstance(name, str) or not name or len(name) > 300:
            raise DataError("a workspace item needs a name of 1 to 300 characters")
        src = Path(src)
        if not src.is_file():
            raise DataError(f"{src.name}: not a file")
        text = _meta_text(meta)
        h = hashlib.sha256()
        with src.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        digest, nbytes = h.hexdigest(), src.stat().st_size
        size = len(text.encode("utf-8")) + nbytes + self.unpacked_bytes(digest, src if move else None)
        with self._tx() as c:
            key = self._ws(c, ws_id)
            old = c.execute("SELECT size, blob, seq FROM items WHERE ws = ? AND kind = ? AND name = ?",
                            (key, kind, name)).fetchone()  # fmt: skip
            self._check_quota(c, key, size - (old[0] if old else 0), int(kind != "input" and old is None))
            target = self._blob_path(digest)
            if not target.is_file() or target.stat().st_size != nbytes:
                target.parent.mkdir(parents=True, exist_ok=True)
                if move:
                    try:
                        os.replace(src, target)
                    except OSError:
                        atomic_write_file(target, lambda tmp: shutil.copyfile(src, tmp))
                else:
                    atomic_write_file(target, lambda tmp: shutil.copyfile(src, tmp))
            seq = old[2] if old else (c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM items WHERE ws = ?",
                                                (key,)).fetchone()[0])  # fmt: skip
            now = time.time()
            c.execute("INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      (key, kind, name, text, digest, size, seq, now))  # fmt: skip
            c.execute("UPDATE workspaces SET used = ? WHERE key = ?", (now, key))
            if old and old[1] and old[1] != digest:
                self._drop_unused(c, {old[1]})
        if move and src.exists():
            src.unlink(missing_ok=True)
        return Item(kind, name, json.loads(text), size, True, now)

    def file_path(self, ws_id: str, kind: str, name: str) -> Path | None:
        """Where the file of an item of this workspace lies (None: no such item, no file, or the file is gone):
        for workers and the streamed download route, which read it in place. Never write to it."""
        if not valid_id(ws_id):
            return None
        rows = self._read(
            "SELECT blob FROM items WHERE ws = ? AND kind = ? AND name = ?", (_key(ws_id), kind, name)
        )
        if not rows or not rows[0][0]:
            return None
        p = self._blob_path(rows[0][0])
        return p if p.is_file() else None

    def unpacked_path(self, digest: str) -> Path:
        """The unpacked folder of the stored file whose SHA-256 is `digest` (``<data>/models/<digest>``; it may
        not exist): where :func:`analysis.model.upload.unpack_model` unpacks an uploaded model."""
        if not (isinstance(digest, str) and unpacked.DIGEST.fullmatch(digest)):
            raise ValueError(f"not a SHA-256 hex digest: {digest!r}")
        return self.unpacked / digest

    def unpacked_bytes(self, digest: str, stored: str | Path | None = None) -> int:
        """Bytes of the unpacked folder of `digest` (0: none), less its files that are hard links of the stored
        file or of `stored` (the file on its way into the store, moved there)."""
        linked = (self._blob_path(digest), Path(stored) if stored is not None else None)
        return unpacked.unpacked_bytes(self.unpacked_path(digest), linked)

    def release(self, digest: str) -> None:
        """Remove the stored file `digest` and its unpacked folder unless an item or share names it: for a caller
        that unpacked a file and then could not store it (a quota, a refused upload)."""
        if not (isinstance(digest, str) and unpacked.DIGEST.fullmatch(digest)):
            return
        with self._tx() as c:
            self._drop_unused(c, {digest})

    def file_by_key(self, ws_key: str, kind: str, name: str) -> tuple[Path, Item] | None:
        """The file and item of (`kind`, `name`) in the workspace whose *key* (the SHA-256 of its id) is `ws_key`,
        or None: for the download route, once a signed link (:mod:`analysis.core.download_links`) named it."""
        if not (isinstance(ws_key, str) and re.fullmatch(r"[0-9a-f]{64}", ws_key)):
            return None
        rows = self._read("SELECT meta, size, blob, updated FROM items WHERE ws = ? AND kind = ? AND name = ?",
                          (ws_key, kind, name))  # fmt: skip
        if not rows or not rows[0][2]:
            return None
        meta, size, blob, updated = rows[0]
        p = self._blob_path(blob)
        return (p, Item(kind, name, json.loads(meta), size, True, updated)) if p.is_file() else None

    def items(self, ws_id: str, kind: str) -> list[Item]:
        """The items of one kind, in the order they were first written."""
        if not valid_id(ws_id):
            return []
        rows = self._read("SELECT name, meta, size, blob, updated FROM items WHERE ws = ? AND kind = ? ORDER BY seq",
                          (_key(ws_id), kind))  # fmt: skip
        return [Item(kind, n, json.loads(m), s, b is not None, u) for n, m, s, b, u in rows]

    def get(self, ws_id: str, kind: str, name: str) -> Item | None:
        """One item, or None."""
        return next((i for i in self.items(ws_id, kind) if i.name == name), None)

    def read(self, ws_id: str, kind: str, name: str) -> bytes | None:
        """The file of an item of this workspace (None: no such item, or it has no file). Files are reached only
        through an item of the caller's workspace."""
        if not valid_id(ws_id):
            return None
        rows = self._read(
            "SELECT blob FROM items WHERE ws = ? AND kind = ? AND name = ?", (_key(ws_id), kind, name)
        )
        return self._read_blob(rows[0][0]) if rows and rows[0][0] else None

    def remove(self, ws_id: str, kind: str, name: str) -> bool:
        """Remove one item; whether it was there."""
        if not valid_id(ws_id):
            return False
        with self._tx() as c:
            key = _key(ws_id)
            row = c.execute(
                "SELECT blob FROM items WHERE ws = ? AND kind = ? AND name = ?", (key, kind, name)
            ).fetchone()
            if row is None:
                return False
            c.execute("DELETE FROM items WHERE ws = ? AND kind = ? AND name = ?", (key, kind, name))
            if row[0]:
                self._drop_unused(c, {row[0]})
        return True

    def rename(self, ws_id: str, kind: str, old: str, new: str) -> bool:
        """Give an item another name (replacing any item of that name; its file and place kept); whether it was
        there."""
        if not valid_id(ws_id) or not isinstance(new, str) or not new or len(new) > 300:
            return False
        with self._tx() as c:
            key = _key(ws_id)
            if not c.execute(
                "SELECT 1 FROM items WHERE ws = ? AND kind = ? AND name = ?", (key, kind, old)
            ).fetchone():
                return False
            gone = c.execute(
                "SELECT blob FROM items WHERE ws = ? AND kind = ? AND name = ?", (key, kind, new)
            ).fetchone()
            c.execute("DELETE FROM items WHERE ws = ? AND kind = ? AND name = ?", (key, kind, new))
            c.execute("UPDATE items SET name = ?, updated = ? WHERE ws = ? AND kind = ? AND name = ?",
                      (new, time.time(), key, kind, old))  # fmt: skip
            if gone and gone[0]:
                self._drop_unused(c, {gone[0]})
        return True

    def inputs(self, ws_id: str) -> dict[str, Any]:
        """The saved page inputs, key → value."""
        return {i.name: i.meta.get("value") for i in self.items(ws_id, "input")}

    def put_input(self, ws_id: str, key: str, value: Any) -> None:
        """Save one page input (a JSON value)."""
        self.put(ws_id, "input", key, {"value": value})

    def usage(self, ws_id: str) -> Usage:
        """Bytes and items held against the quota."""
        with closing(self._connect()) as c:
            b, n = _usage(c, _key(ws_id)) if valid_id(ws_id) else (0, 0)
        return Usage(b, n, paths.workspace_max_bytes(), paths.workspace_max_items())

    def _check_quota(self, c: sqlite3.Connection, key: str, add_bytes: int, add_items: int) -> None:
        b, n = _usage(c, key)
        max_b, max_n = paths.workspace_max_bytes(), paths.workspace_max_items()
        if add_items and n + add_items > max_n:
            raise QuotaError(f"this workspace is full: it holds {n:,} items, the most one may hold "
                             "(TOKLAB_WORKSPACE_MAX_ITEMS): remove library entries or results, or start a new "
                             "workspace")  # fmt: skip
        if add_bytes > 0 and b + add_bytes > max_b:
            raise QuotaError(f"this workspace is full: {human_size(b)} used, {human_size(add_bytes)} more would go "
                             f"over its {human_size(max_b)} (TOKLAB_WORKSPACE_MAX_MB): remove library entries or "
                             "results, or start a new workspace")  # fmt: skip

    # ------------------------------------------------------------------ shares
    def share(self, ws_id: str, data: bytes) -> str:
        """Keep `data` (a text a user asked a share link for) under a new random share id, owned by the
        workspace; the id. QuotaError when the workspace is full."""
        sid, digest = secrets.token_urlsafe(SHARE_BYTES), hashlib.sha256(data).hexdigest()
        with self._tx() as c:
            key = self._ws(c, ws_id)
            self._check_quota(c, key, len(data), 1)
            self._write_blob(digest, data)
            c.execute("INSERT INTO shares VALUES (?, ?, ?, ?, ?)",
                      (hashlib.sha256(sid.encode()).hexdigest(), key, digest, len(data), time.time()))  # fmt: skip
        return sid

    def read_share(self, share_id: str) -> bytes | None:
        """The data of a share link, or None (malformed, unknown, or its workspace is gone)."""
        if not (isinstance(share_id, str) and _SHARE.fullmatch(share_id)):
            return None
        rows = self._read(
            "SELECT blob FROM shares WHERE key = ?", (hashlib.sha256(share_id.encode()).hexdigest(),)
        )
        return self._read_blob(rows[0][0]) if rows else None

    # ------------------------------------------------------------------ files
    def _blob_path(self, digest: str) -> Path:
        return self.blobs / digest[:2] / digest

    def _write_blob(self, digest: str, data: bytes) -> None:
        p = self._blob_path(digest)
        if not p.is_file() or p.stat().st_size != len(data):
            p.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(p, data)

    def _read_blob(self, digest: str) -> bytes | None:
        try:
            return self._blob_path(digest).read_bytes()
        except OSError:
            return None

    def _drop_unused(self, c: sqlite3.Connection, digests: set[str]) -> None:
        """Remove the files no item or share names any more, with their unpacked folders (inside the caller's
        write transaction)."""
        for d in digests:
            if not c.execute("SELECT 1 FROM items WHERE blob = ? UNION ALL SELECT 1 FROM shares WHERE blob = ? LIMIT 1",
                             (d, d)).fetchone():  # fmt: skip
                self._blob_path(d).unlink(missing_ok=True)
                if unpacked.DIGEST.fullmatch(d):
                    unpacked.remove_tree(self.unpacked / d)

    # ------------------------------------------------------------------ operator
    def keys(self) -> set[str]:
        """The keys (SHA-256 of the id, as other stores of the data folder name a workspace) of every workspace."""
        return {k for (k,) in self._read("SELECT key FROM workspaces")}

    def list(self) -> list[WorkspaceInfo]:
        """Every workspace (most recently used first), by key prefix."""
        with closing(self._connect()) as c:
            rows = c.execute("SELECT key, created, used FROM workspaces ORDER BY used DESC").fetchall()
            out = []
            for k, cr, u in rows:
                b, n = _usage(c, k)
                out.append(WorkspaceInfo(k[:12], cr, u, n, b))
            return out

    def prune(self, idle_days: float | None = None, *, dry_run: bool = False) -> list[WorkspaceInfo]:
        """Remove the workspaces unused for more than `idle_days` (default ``TOKLAB_WORKSPACE_IDLE_DAYS``) and the
        empty ones unused for more than :data:`EMPTY_IDLE_DAYS`; the removed ones (with `dry_run`, those that
        would be)."""
        days = paths.workspace_idle_days() if idle_days is None else idle_days
        now = time.time()
        gone = []
        with self._tx() as c:
            rows = c.execute("SELECT key, created, used FROM workspaces").fetchall()
            for k, cr, u in rows:
                b, n = _usage(c, k)
                empty = b == 0 and n == 0
                if u < now - days * _DAY or (empty and u < now - min(days, EMPTY_IDLE_DAYS) * _DAY):
                    gone.append(WorkspaceInfo(k[:12], cr, u, n, b))
                    if not dry_run:
                        blobs = _blobs_of(c, k)
                        c.execute("DELETE FROM workspaces WHERE key = ?", (k,))
                        self._drop_unused(c, blobs)
            if not dry_run:
                self._drop_orphans(c)
        if not dry_run:
            self.prune_unpacked()
        return gone

    def orphan_unpacked(self) -> list[tuple[Path, int]]:
        """The unpacked folders no item or share needs any more, older than an hour (see
        :func:`analysis.core.workspace_unpacked.orphans`); each with its bytes."""
        named = {
            r[0]
            for r in self._read("SELECT blob FROM items WHERE blob IS NOT NULL UNION SELECT blob FROM shares")
        }
        return unpacked.orphans(self.unpacked, named)

    def prune_unpacked(self) -> list[tuple[Path, int]]:
        """Remove the folders :meth:`orphan_unpacked` lists; those removed."""
        gone = self.orphan_unpacked()
        for p, _ in gone:
            unpacked.remove_tree(p)
        return gone

    def _drop_orphans(self, c: sqlite3.Connection) -> None:
        """Remove files no item or share names (left by a crash between writing a file and its row)."""
        if not self.blobs.is_dir():
            return
        named = {
            r[0]
            for r in c.execute("SELECT blob FROM items WHERE blob IS NOT NULL UNION SELECT blob FROM shares")
        }
        for p in self.blobs.glob("*/*"):
            if p.is_file() and p.name not in named and not p.name.startswith("."):
                p.unlink(missing_ok=True)

    def total_bytes(self) -> int:
        """Bytes on disk: the database, the stored files and their unpacked folders (a file hard-linked in both
        counted once)."""
        seen: set[tuple[int, int]] = set()
        db = sum(p.stat().st_size for p in (self.db, self.db.with_name(DB_NAME + "-wal")) if p.is_file())
        return db + unpacked.folder_bytes(self.blobs, seen) + unpacked.folder_bytes(self.unpacked, seen)


def _usage(c: sqlite3.Connection, key: str) -> tuple[int, int]:
    """(bytes, items) of one workspace: items of every kind but inputs, and shares."""
    b, n = c.execute("SELECT COALESCE(SUM(size), 0), COALESCE(SUM(kind != 'input'), 0) FROM items WHERE ws = ?",
                     (key,)).fetchone()  # fmt: skip
    sb, sn = c.execute("SELECT COALESCE(SUM(size), 0), COUNT(*) FROM shares WHERE ws = ?", (key,)).fetchone()
    return int(b + sb), int(n + sn)


def _blobs_of(c: sqlite3.Connection, key: str) -> set[str]:
    rows = c.execute("SELECT blob FROM items WHERE ws = ? AND blob IS NOT NULL UNION SELECT blob FROM shares WHERE ws = ?",
                     (key, key)).fetchall()  # fmt: skip
    return {r[0] for r in rows}


@memoize(maxsize=4)
def store_at(root: str) -> WorkspaceStore:
    """The store under data folder `root` (one object per folder in this process)."""
    return WorkspaceStore(root)


def default_store() -> WorkspaceStore:
    """The store under the configured data folder (``TOKLAB_DATA``)."""
    return store_at(str(paths.data_dir().resolve()))
