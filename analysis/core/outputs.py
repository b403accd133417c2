"""Writing outputs atomically: a reader sees the old file or folder, or the complete new one — never half.

* :func:`atomic_write_bytes` / :func:`atomic_write_text`: write a temporary sibling, flush it to disk, rename it
  over the target — in the folder of the *resolved* target, so a symlink is kept and the file it names written.
  A character device (`/dev/null`) or a FIFO is written directly, never replaced (`/dev/full`: "no space left");
  a socket or block device is refused.
* :func:`atomic_folder`: a context manager yielding a fresh temporary folder beside the target; on success the
  folder is renamed into place (the target must not exist, or be empty, unless ``replace=True``, which swaps the
  old folder out whole); on error the temporary folder is removed and the target is untouched. A run killed
  before that leaves a hidden ``.NAME.@HOST~PID@….partial`` folder: the next write of the same output removes it
  (:func:`clean_stale_partials`: its writer is gone, or it is a day old) — and nothing else.
* :func:`strict_json`: JSON text that standard parsers accept (NaN/Infinity refused, numpy scalars converted);
  :func:`json_ready` turns NaN/Infinity into null first, for reports and downloads where a missing value is fine;
  :func:`json_document` is the one text of a result's ``to_json()`` that a command prints and a page downloads.

Outputs get the permissions of any file the user creates: files ``0o666 & ~umask``, folders
``0o777 & ~umask`` (the temporary siblings ``tempfile`` makes are owner-only until then); a file that is
replaced keeps the mode it had.

Failures to write (a read-only folder, a full disk, an existing file in the way, `/proc`) are DataErrors with the
path and the reason; nothing half-written is left at the target.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
import socket
import stat
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from analysis.errors import DataError

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's file-mode creation mask (read from /proc where it can be, so no other thread ever sees a
    changed mask; else set and restored under a lock)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new output file gets: ``0o666 & ~umask``."""
    return 0o666 & ~current_umask()


def folder_mode() -> int:
    """The mode a new output folder gets: ``0o777 & ~umask``."""
    return 0o777 & ~current_umask()


def _write_error(p: Path, e: OSError) -> DataError:
    return DataError(f"cannot write {_short(p)}: {e.strerror or e}")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path`; returns the path (DataError on failure).

    A regular file (or a new one) is written through a temporary sibling and a rename in the folder of the
    *resolved* target, so a symlink keeps pointing at the file it names, which gets the new bytes. A character
    device (`/dev/null`, `/dev/stdout`) or a FIFO is written directly (a FIFO only when a reader is waiting),
    never replaced; a full device (`/dev/full`) is a "no space left" error. Anything else that is not a regular
    file (a folder, a socket, a block device) is refused.
    """
    p = Path(path)
    try:
        target = p.resolve()
        st = os.stat(target) if target.exists() else None
    except (OSError, RuntimeError) as e:
        raise DataError(f"cannot write {_short(p)}: {getattr(e, 'strerror', None) or e}") from e
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise DataError(f"cannot write {_short(p)}: it is a folder")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            _write_through(p, target, data, fifo=stat.S_ISFIFO(st.st_mode))
            return p
        raise DataError(f"cannot write {_short(p)}: it is {_kind(st.st_mode)}, not a regular file")
    _replace_with(p, target, lambda tmp: tmp.write_bytes(data))
    return p


def atomic_write_file(path: str | os.PathLike, fill: Callable[[Path], None]) -> Path:
    """Let `fill(tmp)` write a file (a writer that wants a path, e.g. a GGUF writer), then put it at `path`
    atomically, as :func:`atomic_write_bytes` does for a regular file or a new one (a symlink keeps pointing at
    the file it names); anything that is not a regular file (a device, a FIFO, a folder) is refused, never
    replaced. Returns the path (DataError on failure; nothing is left half-written)."""
    p = Path(path)
    try:
        target = p.resolve()
        st = os.stat(target) if target.exists() else None
    except (OSError, RuntimeError) as e:
        raise DataError(f"cannot write {_short(p)}: {getattr(e, 'strerror', None) or e}") from e
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise DataError(f"cannot write {_short(p)}: it is {_kind(st.st_mode)}, not a regular file")
    _replace_with(p, target, fill)
    return p


def _replace_with(p: Path, target: Path, fill: Callable[[Path], None]) -> None:
    """Write a temporary sibling of `target` with `fill`, flush it to disk and rename it over `target`."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:100]}.", suffix=".tmp", dir=target.parent)
    except OSError as e:
        raise _write_error(p, e) from e
    os.close(fd)
    try:
        fill(Path(tmp))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise _write_error(p, e) from e
        raise


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a special file"


def _write_through(p: Path, target: Path, data: bytes, *, fifo: bool) -> None:
    """Write `data` straight into a character device or a FIFO (opened without creating or truncating anything;
    a FIFO without a reader is an error, not a wait)."""
    flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | (os.O_NONBLOCK if fifo else 0)
    try:
        fd = os.open(target, flags)
    except OSError as e:
        if fifo and e.errno == errno.ENXIO:
            raise DataError(
                f"cannot write {_short(p)}: it is a FIFO (named pipe) and nothing is reading it"
            ) from e
        raise _write_error(p, e) from e
    try:
        if fifo:
            os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as e:
        raise _write_error(p, e) from e
    finally:
        os.close(fd)


def give_file_modes(folder: str | os.PathLike) -> None:
    """Give the regular files directly in `folder` the mode of any file the user creates (:func:`file_mode`): a
    writer that goes through its own temporary file (transformers' `save_pretrained` writes `model.safetensors`
    0600) otherwise leaves one owner-only file among 0644 ones. Links are left alone."""
    mode = file_mode()
    for f in Path(folder).iterdir():
        st = f.lstat()
        if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != mode:
            os.chmod(f, mode)


def _mode_for(p: Path) -> int:
    """The mode of the file that `p` replaces, or :func:`file_mode` for a new file."""
    try:
        st = p.stat()
    except OSError:
        return file_mode()
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else file_mode()


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):  # numpy arrays and scalars
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def json_ready(obj: Any) -> Any:
    """A copy of `obj` with NaN/±Infinity floats (also numpy ones) replaced by None, ready for :func:`strict_json`."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):  # numpy arrays and scalars
        return json_ready(obj.tolist())
    return obj


def strict_json(obj: Any, *, indent: int | None = 2) -> str:
    """JSON text that strict parsers accept: NaN and ±Infinity raise ValueError instead of being written."""
    return json.dumps(obj, ensure_ascii=False, indent=indent, allow_nan=False, default=_json_default)


def json_document(obj: Any) -> str:
    """The JSON text of a result document, as `python -m analysis … --json` prints it and a page offers it for
    download: NaN/±Infinity as null (:func:`json_ready`), strict (:func:`strict_json`), indented, one newline."""
    return strict_json(json_ready(obj)) + "\n"


def json_lines(rows: Any) -> str:
    """Strict JSON lines of result rows (one compact document per line, NaN as null), as a page offers a table."""
    return "".join(strict_json(json_ready(r), indent=None) + "\n" for r in rows)


def check_output_folder(target: str | os.PathLike, *, replace: bool = False) -> None:
    """DataError when `target` cannot become an output folder: an existing file, a non-empty folder (unless
    `replace`), or a path the file system refuses. Commands call it before their work, :func:`atomic_folder`
    again when it writes."""
    t = Path(target)
    try:
        if t.exists() and not t.is_dir():
            raise DataError(f"output {_short(t)} exists and is not a folder")
        if t.is_dir() and any(t.iterdir()) and not replace:
            raise DataError(
                f"output folder {_short(t)} is not empty: choose a new folder, or ask to replace it (--force on "
                "the command line replaces it whole)"
            )
    except OSError as e:
        raise DataError(f"cannot write the output folder {_short(t)}: {e.strerror or e}") from e


@contextmanager
def atomic_folder(target: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """Build an output folder in a temporary sibling and move it into place when the block succeeds.

    Raises DataError before anything is written when `target` is an existing file, or a non-empty folder and
    `replace` is False. With `replace`, the old folder is swapped out whole (never merged with the new files).
    An OSError inside the block (a full disk) becomes a DataError; the target is then untouched.
    """
    t = _resolved(Path(target))  # a link to a folder keeps pointing at it; the folder it names is written
    check_output_folder(t, replace=replace)
    try:
        parent = t.parent
        parent.mkdir(parents=True, exist_ok=True)
        clean_stale_partials(parent, t.name)
        tmp = Path(tempfile.mkdtemp(prefix=partial_prefix(t.name), suffix=".partial", dir=parent))
    except OSError as e:
        raise DataError(f"cannot write the output folder {_short(t)}: {e.strerror or e}") from e
    try:
        yield tmp
        os.chmod(tmp, folder_mode())  # mkdtemp made it owner-only
        old = None
        if t.exists():
            old = parent / f".{t.name[:100]}.{uuid.uuid4().hex[:8]}.old"
            os.replace(t, old)
        try:
            os.replace(tmp, t)
        except OSError:
            if old is not None:
                os.replace(old, t)  # put the previous output back
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise DataError(f"cannot write the output folder {_short(t)}: {e.strerror or e}") from e
        raise


#: A hidden partial folder older than this is stale whoever wrote it (a run on another machine of a shared disk).
STALE_PARTIAL_S = 24 * 3600
_PARTIAL = re.compile(r"@([A-Za-z0-9_-]{1,40})~(\d{1,10})@[A-Za-z0-9_]+\.partial")
_LEGACY_PARTIAL = re.compile(r"[A-Za-z0-9_]{8}\.partial")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:40] or "host"


def partial_prefix(name: str) -> str:
    """The name start of the hidden partial folders :func:`atomic_folder` makes for an output called `name`:
    ``.NAME.@HOST~PID@`` (the writer, so that a later run can tell a crashed run's leftovers from a live one)."""
    return f".{name[:100]}.@{_host()}~{os.getpid()}@"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def clean_stale_partials(parent: Path, name: str, *, now: float | None = None) -> list[str]:
    """Remove the hidden partial folders a crashed earlier run left for the output `name` in `parent` (never
    anything else): one made on this machine by a process that is gone, or one made elsewhere (or named before
    the writer was recorded) older than :data:`STALE_PARTIAL_S`. Returns the names removed."""
    start = f".{name[:100]}."
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for e in entries:
        if not (e.name.startswith(start) and e.name.endswith(".partial")):
            continue
        rest = e.name[len(start) :]
        m = _PARTIAL.fullmatch(rest)
        if m is None and not _LEGACY_PARTIAL.fullmatch(rest):
            continue  # another output's (`out.v2`'s partials also start with `.out.`), or not ours
        try:
            if not e.is_dir(follow_symlinks=False):
                continue
            old = now - e.stat(follow_symlinks=False).st_mtime > STALE_PARTIAL_S
        except OSError:
            continue
        here = m is not None and m.group(1) == _host()
        if (
            not _alive(int(m.group(2))) if here else old
        ):  # this machine's: its writer is gone; else: a day old
            shutil.rmtree(e.path, ignore_errors=True)
            removed.append(e.name)
    return removed


def _resolved(p: Path) -> Path:
    """`p` with its symlinks resolved (as it is when they cannot be)."""
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return p


def _short(p: Path) -> str:
    s = str(p)
    return s if len(s) <= 200 else s[:100] + "…" + s[-60:]
