"""Training and evaluation text: FLORES splits, shared corpora, uploads, folders — read as streams.

FLORES lines come from :mod:`analysis.texts.flores` (the one FLORES access); this module wraps them as sources.

Every source yields *text units* (a line of a text file, the `text` field of a JSON-lines record) from a
generator, so a multi-GB corpus never has to sit in memory at once. A :class:`Corpus` bundles several
sources with a character budget; it is re-iterable (each `iter()` starts a fresh read) and has a
`fingerprint` that identifies its content for caching.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.core import paths
from analysis.core.inputs import ZipMember, check_not_special, open_zip, path_error, text_units
from analysis.errors import DataError

from . import flores
from .flores import FLORES_TRAIN_LINES

#: Suffixes read as text in folders (optionally gzip-compressed): prose, data and source code; a name without a
#: suffix is read as text too. The one list for every corpus reader (analysis.jobs adds parquet).
TEXT_SUFFIXES = (
    *(".txt", ".text", ".md", ".rst", ".devtest", ".dev", ".tsv", ".csv", ".jsonl", ".json"),
    *(
        ".py",
        ".pyx",
        ".rs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hpp",
        ".cs",
        ".go",
        ".java",
        ".kt",
        ".scala",
    ),
    *(".js", ".jsx", ".ts", ".tsx", ".rb", ".php", ".swift", ".hs", ".lua", ".pl", ".r", ".jl", ".m", ".sh"),
    *(".sql", ".html", ".css", ".xml", ".yaml", ".yml", ".toml", ".tex"),
)


def shared_corpora() -> dict[str, Path]:
    """The shared corpora under assets/corpora: name (e.g. `text/est_Latn.txt.gz`) → path."""
    root = paths.shared_corpora()
    out: dict[str, Path] = {}
    for sub, pattern in (("text", "*.txt.gz"), ("code", "*.jsonl.gz"), ("code/heldout", "*.jsonl.gz")):
        d = root / sub
        if d.is_dir():
            for p in sorted(d.glob(pattern)):
                out[f"{sub}/{p.name}"] = p
    return out


# --------------------------------------------------------------------------------------------------
# Streaming readers (the limits live in analysis.core.inputs.text_units: a byte budget per source that applies
# inside a line, bounded line pieces, strict UTF-8)
# --------------------------------------------------------------------------------------------------
#: Most files read from one zip of text files.
MAX_TEXT_ZIP_ENTRIES = 10_000


def _new_budget() -> tuple[list[int], int]:
    cap = paths.max_text_bytes()
    return [cap], cap


def iter_file(path: str | Path) -> Iterator[str]:
    """Stream the text units of a file: .txt/.jsonl (optionally .gz), or every text file inside a .zip."""
    path = check_not_special(path)  # a FIFO would block here forever
    try:
        if not path.is_file():
            raise DataError(f"text file not found: {path}")
        fh = open(path, "rb")  # noqa: SIM115 - closed below, also when the consumer stops early
    except OSError as e:
        raise DataError(path_error(path, e)) from e
    with fh:
        if path.suffix.lower() == ".zip":
            yield from iter_zip(fh, path.name)
            return
        budget, cap = _new_budget()
        yield from text_units(fh, path.name, budget, cap)


def iter_bytes(name: str, data: bytes) -> Iterator[str]:
    """Stream the text units of an uploaded file's bytes (text, .gz, .jsonl or a .zip of text files)."""
    if name.lower().endswith(".zip"):
        yield from iter_zip(io.BytesIO(data), name)
        return
    budget, cap = _new_budget()
    yield from text_units(io.BytesIO(data), name, budget, cap)


def is_text_name(name: str) -> bool:
    """Whether a file name is read as text in a folder: a :data:`TEXT_SUFFIXES` suffix (optionally ``.gz``) or
    none at all."""
    n = name.lower()
    if n.endswith(".gz"):
        n = n[:-3]
    return n.endswith(TEXT_SUFFIXES) or "." not in Path(n).name


def iter_zip(fileobj: Any, name: str = "archive.zip") -> Iterator[str]:
    """Stream the text units of every text file inside a zip archive (sorted by member name).

    The members share one byte budget, counted on the bytes actually decompressed (not the sizes the headers
    claim); corrupt, encrypted or unsupported members are reported by name.
    """
    zf = open_zip(fileobj, name, MAX_TEXT_ZIP_ENTRIES)
    with zf:
        members = sorted(
            (
                i
                for i in zf.infolist()
                if not i.is_dir() and is_text_name(i.filename) and "__MACOSX" not in i.filename
            ),
            key=lambda i: i.filename,
        )
        if not members:
            raise DataError(f"{name}: the zip holds no text files (.txt, .jsonl, .gz …)")
        budget, cap = _new_budget()
        for info in members:  # read by ZipMember: bounded steps, real sizes and CRC checked
            with ZipMember(zf, info) as fh:
                yield from text_units(fh, f"{name}:{info.filename}", budget, cap)


def iter_folder(path: str | Path, pattern: str = "**/*") -> Iterator[str]:
    """Stream the text units of every text file below a local folder (sorted by path; links not followed)."""
    root = Path(path)
    if not root.is_dir():
        raise DataError(f"folder not found: {root}")
    if pattern == "**/*":
        files = sorted(
            Path(d) / f
            for d, _, names in os.walk(root, followlinks=False)
            for f in names
            if is_text_name(f) and (Path(d) / f).is_file()
        )
    else:
        files = sorted(p for p in root.glob(pattern) if p.is_file() and is_text_name(p.name))
    if not files:
        raise DataError(f"{root}: no text files (.txt, .jsonl, .gz …) in this folder")
    for p in files:
        yield from iter_file(p)


#: Characters read from one uploaded text where a page keeps all of it in memory (a pruning mix, a corpus to
#: tokenize); the rest is left out and the page says so.
MAX_UPLOAD_CHARS = 20_000_000


def upload_lines(name: str, data: bytes, max_chars: int = MAX_UPLOAD_CHARS) -> tuple[list[str], bool]:
    """The text units of an uploaded file (strict UTF-8, bounded reading), at most `max_chars` characters in all;
    returns (units, whether the text was cut)."""
    units = list(with_budget(iter_bytes(name, data), max_chars + 1))
    total = sum(len(u) for u in units)
    if total > max_chars:
        units[-1] = units[-1][: len(units[-1]) - (total - max_chars)]
        return [u for u in units if u], True
    return units, False


def with_budget(units: Iterable[str], max_chars: int | None) -> Iterator[str]:
    """Pass units through until `max_chars` characters were yielded (the last unit is cut to fit)."""
    if not max_chars or max_chars <= 0:
        yield from units
        return
    left = int(max_chars)
    for u in units:
        if len(u) >= left:
            if left > 0:
                yield u[:left]
            return
        left -= len(u)
        yield u


# --------------------------------------------------------------------------------------------------
# Corpus: sources + budget, re-iterable, with a content fingerprint
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Source:
    """One text source: kind is `flores-train`, `flores-heldout`, `file`, `folder`, `bytes` or `lines`."""

    kind: str
    ref: str
    data: bytes | tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def units(self) -> Iterator[str]:
        """A fresh generator over this source's text units."""
        if self.kind == "flores-train":
            lang, _, n = self.ref.partition(":")
            yield from flores.split_lines(lang, int(n or FLORES_TRAIN_LINES))[0]
        elif self.kind == "flores-heldout":
            lang, _, n = self.ref.partition(":")
            yield from flores.split_lines(lang, int(n or FLORES_TRAIN_LINES))[1]
        elif self.kind == "flores":
            yield from flores.lines(self.ref)
        elif self.kind == "file":
            yield from iter_file(self.ref)
        elif self.kind == "folder":
            yield from iter_folder(self.ref)
        elif self.kind == "bytes":
            yield from iter_bytes(self.ref, self.data or b"")
        elif self.kind == "lines":
            yield from (u for u in (self.data or ()) if u.strip())
        else:
            raise DataError(f"unknown text source kind {self.kind!r}")

    def fingerprint(self) -> str:
        """A short identity of this source's content (path + size + mtime for files, a hash for data)."""
        h = hashlib.sha256(f"{self.kind}\0{self.ref}\0".encode())
        if self.kind.startswith("flores"):
            h.update(flores.dataset().data_hash(self.ref.partition(":")[0]).encode())
        elif self.kind == "file":
            st = Path(self.ref).stat()
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        elif self.kind == "folder":
            for p in sorted(Path(self.ref).rglob("*")):
                if p.is_file():
                    st = p.stat()
                    h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
        elif self.kind == "bytes":
            h.update(self.data or b"")
        elif self.kind == "lines":
            for u in self.data or ():
                h.update(u.encode("utf-8", "replace") + b"\n")
        return h.hexdigest()[:16]

    @property
    def label(self) -> str:
        """A short human-readable description."""
        if self.kind == "flores-train":
            lang, _, n = self.ref.partition(":")
            return f"FLORES {lang} (training lines 1–{n or FLORES_TRAIN_LINES})"
        if self.kind == "flores-heldout":
            lang, _, n = self.ref.partition(":")
            return f"FLORES {lang} (held-out lines {int(n or FLORES_TRAIN_LINES) + 1}–1012)"
        if self.kind in ("file", "folder"):
            return Path(self.ref).name
        return self.ref


@dataclass(frozen=True)
class Corpus:
    """A re-iterable text corpus: several sources read in order, cut at `max_chars` characters."""

    sources: tuple[Source, ...]
    max_chars: int | None = None

    def __iter__(self) -> Iterator[str]:
        def gen() -> Iterator[str]:
            for s in self.sources:
                yield from s.units()

        return with_budget(gen(), self.max_chars)

    @property
    def fingerprint(self) -> str:
        """Cache key of the corpus content (sources + budget)."""
        h = hashlib.sha256(str(self.max_chars).encode())
        for s in self.sources:
            h.update(s.fingerprint().encode())
        return h.hexdigest()[:16]

    @property
    def label(self) -> str:
        """Human-readable description, e.g. `FLORES est_Latn (training lines 1–800) + est_Latn.txt.gz`."""
        txt = " + ".join(s.label for s in self.sources) or "(empty)"
        return txt + (f", at most {self.max_chars:,} characters" if self.max_chars else "")

    def stats(self) -> dict[str, int]:
        """Units and characters (one streaming pass)."""
        n = c = 0
        for u in self:
            n += 1
            c += len(u)
        return {"units": n, "chars": c}


def corpus(*sources: Source, max_chars: int | None = None) -> Corpus:
    """Build a Corpus from sources."""
    return Corpus(tuple(sources), max_chars)


def from_paths(paths: Iterable[str | Path], max_chars: int | None = None) -> Corpus:
    """A Corpus over local files, folders or zips (checked to exist now, read lazily later)."""
    srcs = []
    for p in paths:
        p = check_not_special(p)
        if p.is_dir():
            srcs.append(Source("folder", str(p.resolve())))
        elif p.is_file():
            srcs.append(Source("file", str(p.resolve())))
        else:
            raise DataError(f"text file or folder not found: {p}")
    if not srcs:
        raise DataError("no training text given")
    return Corpus(tuple(srcs), max_chars)


def from_lines(lines: Iterable[str], name: str = "lines") -> Source:
    """A Source over an in-memory list of lines."""
    return Source("lines", name, tuple(lines))


def require_text(
    units: Iterable[str] | Callable[[], Iterable[str]], what: str = "training text"
) -> list[str]:
    """Materialise a (small) text source, raising DataError if it holds no non-empty text."""
    src = units() if callable(units) else units
    out = [u for u in src if u and u.strip()]
    if not out:
        raise DataError(f"the {what} is empty: give at least one non-empty line")
    return out
