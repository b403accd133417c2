"""Corpus inputs: files, folders, globs and ``hf://`` paths resolved to shards; strict streaming readers.

A *shard* is one input file: the unit of work the map stage hands to a task (a file is never split, so a
file-local cap such as SA-BPE's per-repository limit applies exactly as in one process). Every path goes through
`fsspec`, so local paths, globs (``DIR/*.devtest``, ``DIR/**/*.jsonl.gz``), ``hf://datasets/ORG/NAME/...`` and
``s3://...`` (with `s3fs`) resolve the same way.

Formats, by file name (a ``.gz`` suffix adds gzip): ``.jsonl`` (the ``text`` field of each record), ``.parquet``
(the ``text`` column), ``.zip`` (every text file inside, as :func:`analysis.texts.corpora.iter_zip` reads an upload;
named directly or by a glob, never picked up from a folder), anything else plain text (one unit per non-empty
line, split at ``\n``, ``\r\n`` or ``\r`` only — never at U+2028 or other characters ``str.splitlines``
breaks at), as :mod:`analysis.texts.corpora` reads them. Two read modes:

* **units** (training text, token counts, compression): exactly the units of :mod:`analysis.texts.corpora` —
  non-empty lines of text files, non-blank ``text`` fields of JSON-lines records and parquet rows;
* **records** (SA-BPE): :class:`analysis.texts.code.CodeRecord` values with ``repo`` / ``language`` defaulting to
  the file stem, the per-file caps of :func:`analysis.texts.code.read_code`.

Unlike the forgiving readers used for uploads, these are strict: a bad gzip stream, a line that is not JSON,
bytes that are not UTF-8, a NUL byte (a binary file) or an unreadable parquet file raise
:class:`~analysis.errors.DataError` naming the shard (and the line or row), because a silently skipped part of
a 100 GB corpus is worse than a stopped job.

Paths a browser user types (the app's corpus field) go through :func:`confine_inputs` first: local files,
folders and globs under the operator's roots only (:func:`analysis.core.paths.confine`).
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath

import fsspec

from analysis.core import paths
from analysis.core.inputs import NulByteError, bounded_lines, check_not_special
from analysis.errors import DataError

from .code import CodeRecord, capped_records
from .corpora import is_text_name, iter_zip

_GLOB_CHARS = ("*", "?", "[")
_LINE_ERRORS = (OSError, EOFError, zlib.error, UnicodeDecodeError)


@dataclass(frozen=True)
class Shard:
    """One input file: its fsspec URL, size in bytes, format (`text`, `jsonl`, `parquet`) and gzip flag.

    `input` is the command-line value it came from; `group` its label for per-file statistics (the file name
    without compression and format suffixes, e.g. ``est_Latn`` for ``est_Latn.devtest``).
    """

    url: str
    size: int
    fmt: str
    gzip: bool
    input: str
    group: str
    mtime: str = ""

    @property
    def name(self) -> str:
        """The file name."""
        return PurePosixPath(self.url).name

    def to_json(self) -> dict:
        """A JSON-serialisable dict (the manifest's shard entry)."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Shard:
        """Rebuild a shard from :meth:`to_json`."""
        return cls(**d)


def shard_format(name: str) -> tuple[str, bool]:
    """(`text` | `jsonl` | `parquet` | `zip`, gzip?) from a file name."""
    n = name.lower()
    if n.endswith(".zip"):
        return "zip", False
    gz = n.endswith(".gz")
    if gz:
        n = n[:-3]
    if n.endswith(".parquet"):
        if gz:
            raise DataError(f"{name}: gzip-compressed parquet is not supported (parquet compresses itself)")
        return "parquet", False
    if ".jsonl" in n:
        return "jsonl", gz
    return "text", gz


def _group_of(name: str) -> str:
    return name.split(".")[0] or name


def _is_text_name(name: str) -> bool:
    n = name.lower()
    return is_text_name(n) or n.endswith(".parquet")


def _mtime(info: dict) -> str:
    for k in ("mtime", "last_modified", "LastModified", "last_commit"):
        v = info.get(k)
        if v is not None:
            return str(v)
    return ""


def _shard(fs, path: str, info: dict, value: str) -> Shard:
    if _is_local(fs):
        check_not_special(path)  # a FIFO, socket or device: refused before any reader opens it
    url = fs.unstrip_protocol(path) if not _is_local(fs) else path
    name = PurePosixPath(path).name
    fmt, gz = shard_format(name)
    return Shard(url, int(info.get("size") or 0), fmt, gz, value, _group_of(name), _mtime(info))


def _is_local(fs) -> bool:
    return "file" in (fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,))


def resolve(values: Iterable[str], *, layout: str = "text", heldout: bool = False) -> list[Shard]:
    """The shards of several inputs (files, folders, globs, ``hf://`` or other fsspec URLs), deduplicated.

    `layout="text"`: a folder means every text file below it (recursively, as :func:`analysis.texts.corpora.iter_folder`).
    `layout="code"`: a folder means its ``*.jsonl.gz`` then ``*.jsonl`` files (its ``heldout/`` folder with
    `heldout`), as :func:`analysis.texts.code.read_code`. Within one input the files are sorted by path.
    """
    out: list[Shard] = []
    seen: set[str] = set()
    for value in values:
        value = str(value).strip()
        if not value:
            continue
        try:
            fs, root = fsspec.core.url_to_fs(value)
        except (ValueError, ImportError) as e:
            raise DataError(f"{value}: cannot open this location ({e})") from e
        try:
            found = _expand(fs, root, value, layout, heldout)
        except (OSError, ValueError) as e:
            raise DataError(f"{value}: cannot list this location ({e})") from e
        for s in found:
            if s.url not in seen:
                seen.add(s.url)
                out.append(s)
    if not out:
        raise DataError("no corpus files given")
    return out


def _expand(fs, root: str, value: str, layout: str, heldout: bool) -> list[Shard]:
    if any(c in root for c in _GLOB_CHARS):
        hits = fs.glob(root, detail=True)
        files = sorted((p, i) for p, i in hits.items() if i.get("type") != "directory")
        if not files:
            raise DataError(f"no files match {value}")
        return [_shard(fs, p, i, value) for p, i in files]
    if not fs.exists(root):
        raise DataError(f"corpus file or folder not found: {value}")
    if fs.isdir(root):
        if layout == "code":
            d = root.rstrip("/") + ("/heldout" if heldout else "")
            entries = fs.ls(d, detail=True) if fs.isdir(d) else []
            files = {PurePosixPath(e["name"]).name: e for e in entries if e.get("type") != "directory"}
            names = sorted(n for n in files if n.endswith(".jsonl.gz")) + sorted(
                n for n in files if n.endswith(".jsonl")
            )
            picked = [(files[n]["name"], files[n]) for n in names]
        else:
            found = fs.find(root, detail=True)
            picked = sorted((p, i) for p, i in found.items() if _is_text_name(PurePosixPath(p).name))
        if not picked:
            kind = "*.jsonl / *.jsonl.gz" if layout == "code" else "text (.txt, .jsonl, .parquet, .gz …)"
            raise DataError(f"{value}: no {kind} files in this folder")
        return [_shard(fs, p, i, value) for p, i in picked]
    return [_shard(fs, root, fs.info(root), value)]


# --------------------------------------------------------------------------------------------------
# Strict streaming readers
# --------------------------------------------------------------------------------------------------
class Position:
    """How far a reader got in its shard: compressed bytes consumed (for progress) and the current line/row."""

    __slots__ = ("raw", "where")

    def __init__(self) -> None:
        self.raw = None
        self.where = ""

    def bytes_read(self) -> int:
        """Bytes of the (compressed) file consumed so far."""
        try:
            return int(self.raw.tell()) if self.raw is not None else 0
        except (OSError, ValueError):
            return 0


def _corrupt(shard: Shard, where: str, e: BaseException) -> DataError:
    if isinstance(e, FileNotFoundError):
        return DataError(f"shard {shard.url} is missing (moved or deleted since the job was planned)")
    if isinstance(e, NulByteError):
        what = "holds a NUL byte; this looks like a binary file, not text"
    elif isinstance(e, UnicodeDecodeError):
        what = f"bytes that are not UTF-8 ({e.reason} at byte {e.start} of the line)"
    elif isinstance(e, (gzip.BadGzipFile, zlib.error)):
        what = f"not a valid gzip stream ({e})"
    elif isinstance(e, EOFError):
        what = "the compressed stream ends early (truncated file)"
    else:
        what = f"{type(e).__name__}: {e}"
    at = f" ({where})" if where else ""
    return DataError(f"corrupt shard {shard.url}{at}: {what}")


def _lines(shard: Shard, pos: Position) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) of a text or JSON-lines shard, through the one bounded line reader
    (:func:`analysis.core.inputs.bounded_lines`): strict UTF-8, no NUL bytes, bounded memory.

    A text line longer than :func:`analysis.core.paths.max_line_chars` characters comes in pieces of that size (each
    piece a unit, under the same line number); a JSON line longer than 16 times that is refused. The shard's
    decompressed text is capped at :func:`analysis.core.paths.max_text_bytes` (``TOKLAB_MAX_TEXT_MB``), checked as
    it is read, so a small compressed bomb stops early with a clear error. Damage is named as a corrupt shard with
    its URL and line.
    """
    jsonl = shard.fmt == "jsonl"
    limit = paths.max_line_chars() * (16 if jsonl else 1)
    cap = paths.max_text_bytes()
    n = 0
    try:
        with fsspec.open(shard.url, "rb") as raw:
            pos.raw = raw
            for n, piece, whole in bounded_lines(
                raw, shard.url, [cap], cap, limit, gz=shard.gzip, raw_errors=True
            ):
                if jsonl and not whole and len(piece) >= limit:
                    raise DataError(
                        f"corrupt shard {shard.url} (line {n}): a JSON line longer than {limit:,} characters"
                    )
                yield n, piece.rstrip("\r\n") if whole else piece
    except NulByteError as e:
        raise _corrupt(shard, f"line {e.args[0]}", e) from None
    except _LINE_ERRORS as e:
        raise _corrupt(
            shard, f"line {n + 1}" if n or not isinstance(e, FileNotFoundError) else "", e
        ) from None


def _json_record(shard: Shard, n: int, line: str) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise DataError(f"corrupt shard {shard.url} (line {n}): not valid JSON ({e.msg})") from None


def _parquet_rows(shard: Shard, columns: list[str], pos: Position) -> Iterator[tuple[int, dict]]:
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    row = 0
    try:
        with fsspec.open(shard.url, "rb") as raw:
            pos.raw = raw
            pf = pq.ParquetFile(raw)
            names = set(pf.schema_arrow.names)
            if "text" not in names:
                raise DataError(
                    f"{shard.url}: the parquet file has no 'text' column (columns: {sorted(names)})"
                )
            cols = [c for c in columns if c in names]
            for batch in pf.iter_batches(batch_size=1024, columns=cols):
                for rec in batch.to_pylist():
                    row += 1
                    yield row, rec
    except (pa.ArrowException, OSError, EOFError) as e:
        raise DataError(f"corrupt shard {shard.url} (row {row + 1}): unreadable parquet ({e})") from None


def iter_units(shard: Shard, pos: Position | None = None) -> Iterator[str]:
    """The text units of a shard, as :mod:`analysis.texts.corpora` yields them (strict decoding, DataError on damage)."""
    pos = pos or Position()
    if shard.fmt == "parquet":
        for _, rec in _parquet_rows(shard, ["text"], pos):
            t = rec.get("text")
            if isinstance(t, str) and t.strip():
                yield t
        return
    if shard.fmt == "zip":
        yield from _zip_units(shard, pos)
        return
    jsonl = shard.fmt == "jsonl"
    for n, line in _lines(shard, pos):
        if not line.strip():
            continue
        if jsonl:
            rec = _json_record(shard, n, line)
            t = rec.get("text") if isinstance(rec, dict) else None
            if isinstance(t, str) and t.strip():
                yield t
        else:
            yield line


def _zip_units(shard: Shard, pos: Position) -> Iterator[str]:
    """The text units of every text file inside a zip shard (:func:`analysis.texts.corpora.iter_zip`)."""
    try:
        with fsspec.open(shard.url, "rb") as raw:
            pos.raw = raw
            try:
                yield from iter_zip(raw, shard.name)
            except DataError as e:
                raise DataError(f"corrupt shard {shard.url}: {e}") from None
    except FileNotFoundError as e:
        raise _corrupt(shard, "", e) from None
    except OSError as e:
        raise DataError(f"corrupt shard {shard.url}: {e}") from None


def iter_records(
    shard: Shard,
    *,
    max_files_per_repo: int | None = None,
    max_bytes_per_repo: int | None = None,
    pos: Position | None = None,
) -> Iterator[CodeRecord]:
    """Source-attributed records of a JSON-lines (or parquet) shard, kept as :func:`analysis.texts.code.read_code`
    keeps them (:func:`analysis.texts.code.capped_records`)."""
    pos = pos or Position()
    if shard.fmt == "parquet":
        rows: Iterator[object] = (
            r for _, r in _parquet_rows(shard, ["text", "repo", "language", "path"], pos)
        )
    elif shard.fmt == "jsonl":
        rows = (_json_record(shard, n, line) for n, line in _lines(shard, pos) if line.strip())
    else:
        raise DataError(f"{shard.url}: source-attributed records need JSON-lines or parquet files")
    yield from capped_records(
        rows, shard.group, max_files_per_repo=max_files_per_repo, max_bytes_per_repo=max_bytes_per_repo
    )


# --------------------------------------------------------------------------------------------------
# Paths named in the browser
# --------------------------------------------------------------------------------------------------
def confine_inputs(values: Iterable[str], *, layout: str = "text") -> list[str]:
    """Corpus inputs a browser user typed, checked against the operator's roots; returns them resolved.

    Each value is a local file, folder or glob (``DIR/*.txt``, ``DIR/**/*.jsonl.gz``); URLs (``hf://``,
    ``s3://`` …) are refused, as is any ``..``. The part before the first wildcard must pass
    :func:`analysis.core.paths.confine` (inside the roots, links resolved, off unless server paths are enabled), and
    every file the value resolves to must lie inside the roots too (a link in a matched folder cannot lead out).
    Raises :class:`analysis.core.paths.ServerPathError` (a DataError).
    """
    out: list[str] = []
    roots = paths.server_roots()
    for raw in values:
        value = str(raw).strip()
        if not value:
            continue
        if "://" in value or value.startswith(("hf:", "s3:", "gs:", "http:", "https:")):
            raise paths.ServerPathError(
                f"refused {value!r}: only files and folders on this server are accepted"
            )
        cut = min((value.find(c) for c in _GLOB_CHARS if c in value), default=-1)
        if cut < 0:
            out.append(str(paths.confine(value)))
            continue
        if ".." in PurePosixPath(value).parts:
            raise paths.ServerPathError(f"refused path {value!r}: '..' is not allowed")
        prefix = value[:cut]
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        if not head and prefix.startswith("/"):
            head = "/"
        pattern = value[len(head) :].lstrip("/") if head else value
        base = paths.confine(head or ".")
        out.append(f"{str(base).rstrip('/')}/{pattern}")
    for s in resolve(out, layout=layout):
        real = os.path.realpath(s.url)
        if not any(real == str(r) or real.startswith(str(r).rstrip("/") + "/") for r in roots):
            raise paths.ServerPathError(f"refused {s.url}: it lies outside the allowed folders")
    return out
