"""Reading what users send, bounded before anything is allocated: the one home of input limits and of turning
low-level failures into messages.

* :func:`check_not_special` — the one check every reader of a user-given path makes before opening it: a FIFO,
  socket or device is refused (a FIFO would block the reader forever), with the same message everywhere.
* :func:`read_file` — a whole file (tokenizer.json, a `.model`, `vocab.txt`, a scores file) under the one size
  cap (:func:`analysis.core.paths.max_file_bytes`), however it arrives: a path, a folder, a zip member, the hub.
* :func:`check_size` — the same cap for bytes already in memory (an upload).
* :func:`parse_json` — JSON with every failure (syntax, nesting 100,000 deep, not UTF-8) as one error class.
* :func:`decode_utf8` — text files must be UTF-8: a clear error with the byte offset, never U+FFFD.
* :class:`ZipMember` / :func:`copy_member` — a zip member inflated here in bounded steps, counting the bytes
  actually decompressed and checking size and CRC at the end (zipfile's own reader inflates a member whose header
  understates its size in one call); encrypted members and methods other than stored/deflate are refused.
* :data:`ARCHIVE_ERRORS` — the exceptions :mod:`zipfile`, :mod:`gzip` and :mod:`zlib` raise on corrupt data;
  :func:`open_zip` refuses a zip declaring too many entries before :mod:`zipfile` reads its directory.
* :func:`text_units` — a text stream read line by line with a byte budget that applies inside a line (a 3 GB
  line is read in bounded pieces), strict UTF-8, NUL bytes refused.
* :func:`whole_number` / :func:`real_number` — the numbers of the command line with their bounds, checked as it is
  read (argparse types): a count of -1 or 0, a NaN or an infinite rate is refused before a command starts, never
  read as "all but the last" by a slice or passed on to a library that fails with a traceback.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import os
import re
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

from analysis.errors import AnalysisError, DataError

from .paths import max_file_bytes, max_line_chars, max_text_bytes

#: What zipfile/gzip/zlib raise on corrupt, truncated, encrypted or unsupported archives.
ARCHIVE_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    NotImplementedError,  # an unsupported compression method
    RuntimeError,  # an encrypted member ("password required")
)
CHUNK = 1 << 20


def human_size(n: int) -> str:
    """1234 → '1.2 kB', 200 MiB → '200 MB' (binary units, short labels)."""
    for unit, div in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} bytes"


def too_big(name: str, size: int, cap: int | None = None) -> str:
    """The message for a file over the size cap."""
    cap = max_file_bytes() if cap is None else cap
    return (
        f"{name} is {human_size(size)}, over the {human_size(cap)} limit for tokenizer and vocabulary files "
        "(did you give model weights?)"
    )


def check_size(name: str, size: int, error: type[AnalysisError] = DataError) -> None:
    """Raise `error` when `size` bytes exceed the file cap."""
    if size > max_file_bytes():
        raise error(too_big(name, size))


def path_error(path: str | os.PathLike, e: OSError) -> str:
    """A short message for an OSError on a path (the path shortened when it is very long)."""
    s = os.fspath(path)
    shown = s if len(s) <= 200 else s[:100] + "…" + s[-60:]
    return f"cannot read {shown}: {e.strerror or e}"


def _special_kind(mode: int) -> str | None:
    """What a file that readers refuse is, in words (None for a regular file, a folder or a missing one)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "a special file"
    return None


def special_file_message(path: str | os.PathLike, kind: str) -> str:
    """The one message for an input that is not a regular file or a folder."""
    s = os.fspath(path)
    shown = s if len(s) <= 200 else s[:100] + "…" + s[-60:]
    return f"cannot read {shown}: it is {kind}, not a regular file or a folder of files"


def check_not_special(path: str | os.PathLike, error: type[AnalysisError] = DataError) -> Path:
    """`path` (as a Path) unless it is a FIFO, socket or device (symlinks followed), which raises `error` before
    anything opens it: opening a FIFO waits for a writer forever, a device never ends. A missing path passes (the
    caller's own "not found" message follows); a regular file and a folder pass."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except (OSError, ValueError):
        return p
    kind = _special_kind(mode)
    if kind is not None:
        raise error(special_file_message(p, kind))
    return p


def read_file(
    path: str | os.PathLike,
    error: type[AnalysisError] = DataError,
    cap: int | None = None,
    what: str = "tokenizer and vocabulary files",
) -> bytes:
    """The bytes of one file, refused before reading when over the cap (the file cap unless `cap` is given; never
    read past it), and before opening when it is not a regular file (:func:`check_not_special`). `what` names the
    kind of file in the message for a smaller cap."""
    p = check_not_special(path, error)
    cap = max_file_bytes() if cap is None else cap

    def message(size: int) -> str:
        if cap == max_file_bytes():
            return too_big(p.name, size, cap)
        return f"{p.name} is {human_size(size)}, over the {human_size(cap)} limit for {what}"

    try:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > cap:
                raise error(message(size))
            data = f.read(cap + 1)  # /proc files and growing files report a size that may be wrong
    except OSError as e:
        raise error(path_error(p, e)) from e
    if len(data) > cap:
        raise error(message(len(data)))
    return data


def parse_json(data: bytes | str, what: str, error: type[AnalysisError] = DataError) -> Any:
    """`json.loads` whose failures (syntax, deep nesting, bad UTF-8, NaN literals stay allowed) become `error`."""
    try:
        return json.loads(data)
    except RecursionError:
        raise error(f"{what} is nested too deeply to be read (a corrupt or hostile file)") from None
    except UnicodeDecodeError as e:
        raise error(f"{what} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise error(f"{what} is not valid JSON ({e.msg}, line {e.lineno} column {e.colno})") from None
    except ValueError as e:  # e.g. integers with too many digits
        raise error(f"{what} is not valid JSON ({e})") from None


def decode_utf8(data: bytes, what: str, error: type[AnalysisError] = DataError) -> str:
    """UTF-8 text (a BOM dropped), or `error` naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(
            f"{what} is not UTF-8 text (byte 0x{data[e.start]:02X} at offset {e.start}): convert it to UTF-8"
        ) from None


class ZipMember(io.RawIOBase):
    """The bytes of one zip member, decompressed here in bounded steps and checked as they come.

    :mod:`zipfile` trusts a member's header: when the header understates the size, its reader inflates the whole
    rest of the member in one call (a few kB of zip → hundreds of MB at once). Here every read returns at most
    what was asked for; the CRC and the real size are checked at the end (a mismatch is a DataError), and
    encrypted members and methods other than stored and deflate are refused up front.
    """

    def __init__(
        self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, error: type[AnalysisError] = DataError
    ) -> None:
        """Open `info` of `zf` (which must have been opened on a seekable file object)."""
        super().__init__()
        self.info, self.error, self.fp = info, error, zf.fp
        name = info.filename
        if info.flag_bits & 0x1:
            raise error(f"{name} in the zip is encrypted: zip it again without a password")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise error(
                f"{name} in the zip uses an unsupported compression method ({info.compress_type}): "
                "use deflate or store"
            )
        try:
            self.fp.seek(info.header_offset)
            head = self.fp.read(30)
        except (OSError, ValueError):  # a negative offset: the zip's directory does not fit the file
            raise error(f"{name} is corrupt or truncated (its header lies outside the zip)") from None
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise error(f"{name} is corrupt or truncated (bad local header)")
        n, m = struct.unpack_from("<HH", head, 26)
        self.pos = info.header_offset + 30 + n + m
        self.left = info.compress_size
        self.z = zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
        self.crc = 0
        self.size = 0

    def readable(self) -> bool:
        """Always readable."""
        return True

    def _raw(self, n: int) -> bytes:
        self.fp.seek(self.pos)
        data = self.fp.read(min(n, self.left))
        self.pos += len(data)
        self.left -= len(data)
        if not data and self.left > 0:
            raise self.error(f"{self.info.filename} is corrupt or truncated (the zip ends inside it)")
        return data

    def readinto(self, b: Any) -> int:
        """Decompress at most len(b) bytes into b; 0 at the (checked) end of the member."""
        want = len(b)
        try:
            while True:
                if self.z is None:
                    data = self._raw(want) if self.left > 0 else b""
                elif self.z.unconsumed_tail:
                    data = self.z.decompress(self.z.unconsumed_tail, want)
                elif self.left > 0 and not self.z.eof:
                    data = self.z.decompress(self._raw(CHUNK), want)
                else:
                    data = b""
                if data:
                    self.crc = zlib.crc32(data, self.crc)
                    self.size += len(data)
                    b[: len(data)] = data
                    return len(data)
                if self.z is not None and not self.z.eof and (self.left > 0 or self.z.unconsumed_tail):
                    continue  # compressed input that produced no output yet
                self._finish()
                return 0
        except zlib.error as e:
            raise self.error(f"{self.info.filename} is corrupt ({e})") from None

    def _finish(self) -> None:
        name = self.info.filename
        if self.z is not None and not self.z.eof:
            raise self.error(f"{name} is corrupt or truncated (its compressed data ends early)")
        if self.size != self.info.file_size:
            raise self.error(
                f"{name} is corrupt: its header says {self.info.file_size:,} bytes but it holds {self.size:,}"
            )
        if self.crc != self.info.CRC:
            raise self.error(f"{name} is corrupt (bad CRC-32)")


def copy_member(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    out: IO[bytes],
    budget: int,
    error: type[AnalysisError] = DataError,
) -> int:
    """Copy one zip member to `out` in chunks; returns the bytes written (at most `budget`, else `error`).

    The count is of the bytes actually decompressed (:class:`ZipMember`), not the sizes the zip's headers claim.
    """
    written = 0
    src = ZipMember(zf, info, error)
    buf = bytearray(CHUNK)
    while True:
        n = src.readinto(buf)
        if not n:
            break
        written += n
        if written > budget:
            raise error(f"the zip expands to more than {human_size(budget)}: refused")
        out.write(buf[:n])
    return written


def check_zip_member(info: zipfile.ZipInfo, error: type[AnalysisError] = DataError) -> None:
    """Refuse a zip entry whose path is absolute, names a drive, climbs out with `..` or holds a NUL, and one that
    is a symbolic link (`error`, naming the entry)."""
    n = info.filename.replace("\\", "/")
    parts = PurePosixPath(n).parts
    if n.startswith("/") or re.match(r"^[A-Za-z]:", n) or ".." in parts or "\x00" in n:
        raise error(f"zip entry {info.filename!r} has an absolute or '..' path: refused")
    if (info.external_attr >> 16) & 0o170000 == 0o120000:
        raise error(f"zip entry {info.filename!r} is a symbolic link: refused")


def member_error(name: str, e: BaseException) -> str:
    """The message for a corrupt, encrypted or unsupported archive member."""
    text = str(e)
    if isinstance(e, RuntimeError) and "encrypted" in text.lower():
        return f"{name} in the zip is encrypted: zip it again without a password"
    if isinstance(e, NotImplementedError):
        return f"{name} in the zip uses an unsupported compression method ({text}): use deflate or store"
    return f"{name} is corrupt or truncated ({type(e).__name__}: {text})"


# --------------------------------------------------------------------------------------------------
# Zip archives: the entry count read from the end record before zipfile builds one object per entry
# --------------------------------------------------------------------------------------------------
_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


def zip_entry_count(fh: IO[bytes]) -> int | None:
    """The number of entries a zip's end-of-central-directory record declares (None when there is none)."""
    try:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        start = max(0, size - (_EOCD.size + 65535))
        fh.seek(start)
        tail = fh.read()
    except OSError:
        return None
    pos = tail.rfind(b"PK\x05\x06")
    if pos < 0 or pos + _EOCD.size > len(tail):
        return None
    count = _EOCD.unpack_from(tail, pos)[4]
    if count != 0xFFFF or pos < _ZIP64_LOCATOR.size:
        return count
    loc = _ZIP64_LOCATOR.unpack_from(tail, pos - _ZIP64_LOCATOR.size)
    if loc[0] != b"PK\x06\x07":
        return count
    try:
        fh.seek(loc[2])
        rec = fh.read(_ZIP64_EOCD.size)
    except (OSError, ValueError):
        return count
    if len(rec) < _ZIP64_EOCD.size or rec[:4] != b"PK\x06\x06":
        return count
    return _ZIP64_EOCD.unpack(rec)[7]


def open_zip(
    fh: IO[bytes], name: str, max_entries: int, error: type[AnalysisError] = DataError
) -> zipfile.ZipFile:
    """A ZipFile over `fh`, refused before its directory is read when it declares more than `max_entries`."""
    n = zip_entry_count(fh)
    if n is not None and n > max_entries:
        raise error(f"{name} holds {n:,} entries, more than the {max_entries:,} accepted: refused")
    try:
        fh.seek(0)
        return zipfile.ZipFile(fh)
    except ARCHIVE_ERRORS as e:
        raise error(f"{name}: not a valid zip archive ({e})") from None
    except OSError as e:
        raise error(f"{name}: cannot read the zip archive ({e.strerror or e})") from None


# --------------------------------------------------------------------------------------------------
# Text streams with a byte budget that applies inside a line
# --------------------------------------------------------------------------------------------------
class CappedReader(io.RawIOBase):
    """A readable stream that counts the (decompressed) bytes read through it against a shared budget.

    `budget` is a one-element list so that several streams (the members of one zip) share it. Past the budget,
    and on corrupt compressed data, reading raises DataError.
    """

    def __init__(
        self, inner: IO[bytes], name: str, budget: list[int], cap: int, *, raw_errors: bool = False
    ) -> None:
        """Wrap `inner` (a file, a GzipFile, a zip member). With `raw_errors`, a corrupt stream's own exception
        passes through for the caller to name (a corpus shard names it with its URL and line)."""
        super().__init__()
        self.inner = inner
        self.name_shown = name
        self.budget = budget
        self.cap = cap
        self.raw_errors = raw_errors

    def readable(self) -> bool:
        """Always readable."""
        return True

    def readinto(self, b: Any) -> int:
        """Read into `b`, counting the bytes; DataError past the budget or on corrupt data."""
        try:
            n = self.inner.readinto(b)
        except (*ARCHIVE_ERRORS, gzip.BadGzipFile) as e:
            if self.raw_errors:
                raise
            raise DataError(member_error(self.name_shown, e)) from None
        except OSError as e:
            if self.raw_errors:
                raise
            raise DataError(f"cannot read {self.name_shown}: {e.strerror or e}") from None
        n = n or 0
        self.budget[0] -= n
        if self.budget[0] < 0:
            raise DataError(
                f"{self.name_shown}: more than {human_size(self.cap)} of text (the limit per source, "
                "TOKLAB_MAX_TEXT_MB); give a character budget or a smaller file"
            )
        return n


class NulByteError(ValueError):
    """A NUL byte in what should be text (raised by :func:`bounded_lines` with `raw_errors`)."""


def bounded_lines(
    fh: IO[bytes],
    name: str,
    budget: list[int],
    cap: int,
    limit: int,
    *,
    gz: bool | None = None,
    raw_errors: bool = False,
) -> Iterator[tuple[int, str, bool]]:
    """The one bounded line reader: (line number, piece, whether the piece ends its line) over a binary stream.

    The stream is gunzipped when `gz` is true (None: when `name` ends in ``.gz``), decoded as strict UTF-8 (a BOM
    dropped), and cut into pieces of at most `limit` characters, so no line has to fit in memory whole; the
    decompressed bytes count against the shared `budget` (:class:`CappedReader`: DataError past it, naming
    ``TOKLAB_MAX_TEXT_MB``). Every reader of user text goes through it: local files, uploads and zip members
    (:func:`text_units`, :func:`json_records`) and corpus shards (:mod:`analysis.texts.shards`).

    Text that is not UTF-8 and NUL bytes raise DataError naming `name` and the line; with `raw_errors` they raise
    ``UnicodeDecodeError`` / :class:`NulByteError`, and a corrupt compressed stream its own exception, for a
    caller that names the place its own way (a shard's URL).
    """
    use_gz = name.lower().endswith(".gz") if gz is None else gz
    inner: IO[bytes] = gzip.GzipFile(fileobj=fh) if use_gz else fh
    raw = io.BufferedReader(CappedReader(inner, name, budget, cap, raw_errors=raw_errors), buffer_size=CHUNK)
    stream = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline="")
    line_no = 1
    try:
        while True:
            piece = stream.readline(limit)
            if not piece:
                return
            if "\x00" in piece:
                if raw_errors:
                    raise NulByteError(line_no)
                raise DataError(
                    f"{name} line {line_no}: holds a NUL byte; this looks like a binary file, not text"
                )
            whole = piece.endswith(("\n", "\r"))
            yield line_no, piece, whole
            if whole:
                line_no += 1
    except UnicodeDecodeError as e:
        if raw_errors:
            raise
        raise DataError(
            f"{name} is not UTF-8 text (byte 0x{e.object[e.start]:02X} near line {line_no}): convert it to UTF-8 "
            "(Latin-1 and binary files are refused rather than read with replacement characters)"
        ) from None


def json_records(fh: IO[bytes], name: str, budget: list[int] | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed record) for each non-empty line of a JSON-lines stream (.gz decompressed).

    Lines longer than 16 × :func:`analysis.core.paths.max_line_chars` characters, invalid JSON (including nesting
    too deep) and text that is not UTF-8 raise DataError; the stream shares `budget` (default: a fresh one of
    :func:`analysis.core.paths.max_text_bytes`).
    """
    cap = max_text_bytes()
    budget = [cap] if budget is None else budget
    limit = max_line_chars() * 16
    for line_no, piece, whole in bounded_lines(fh, name, budget, cap, limit):
        if not whole and len(piece) >= limit:
            raise DataError(f"{name} line {line_no}: a JSON line longer than {limit:,} characters: refused")
        line = piece.rstrip("\r\n")
        if line.strip():
            yield line_no, parse_json(line, f"{name} line {line_no}")


def text_units(fh: IO[bytes], name: str, budget: list[int], cap: int) -> Iterator[str]:
    """The non-empty lines of one binary stream (.gz decompressed), as UTF-8 text units of bounded size.

    A line longer than :func:`analysis.core.paths.max_line_chars` characters is read and yielded in pieces of that
    size, so no line has to fit in memory whole (the byte budget applies inside a line). JSON-lines files
    (`.jsonl` in the name) yield the `text` field of each record (see :func:`json_records`). Text that is not
    UTF-8 (Latin-1, binary) and text holding NUL bytes are refused with the line number, never decoded into
    U+FFFD.
    """
    if ".jsonl" in name.lower():
        for _, rec in json_records(fh, name, budget):
            text = rec.get("text") if isinstance(rec, dict) else None
            if isinstance(text, str) and text.strip():
                yield text
        return
    for _, piece, _ in bounded_lines(fh, name, budget, cap, max_line_chars()):
        unit = piece.rstrip("\r\n")
        if unit.strip():
            yield unit


def whole_number(minimum: int = 0, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse `type`: a whole number from `minimum` to `maximum` (inclusive; None: no upper bound).

    A value outside is refused as the command line is read (argparse reports ``argument --n: …``); the bounds are
    on the returned function (`minimum`, `maximum`) for the tests that try every option."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            want = f"from {minimum} to {maximum}" if maximum is not None else f"at least {minimum}"
            raise argparse.ArgumentTypeError(f"must be a whole number {want}, not {value}")
        return value

    parse.minimum, parse.maximum = minimum, maximum  # type: ignore[attr-defined]
    parse.__name__ = "whole number"
    return parse


def real_number(low: float, high: float = math.inf, *, open_low: bool = False) -> Callable[[str], float]:
    """An argparse `type`: a finite number from `low` to `high` (inclusive, or above `low` with `open_low`).

    NaN and infinities are refused with the rest (argparse reports ``argument --x: …``); the bounds are on the
    returned function (`low`, `high`, `open_low`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
        inside = value > low if open_low else value >= low
        if not (math.isfinite(value) and inside and value <= high):
            if not math.isfinite(high):
                want = f"above {low:g}" if open_low else f"at least {low:g}"
            else:
                want = f"above {low:g} and at most {high:g}" if open_low else f"between {low:g} and {high:g}"
            raise argparse.ArgumentTypeError(f"must be a finite number {want}, not {text.strip()}")
        return value

    parse.low, parse.high, parse.open_low = low, high, open_low  # type: ignore[attr-defined]
    parse.__name__ = "number"
    return parse
