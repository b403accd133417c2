"""The one cache: in-memory memoisation keyed by content, and a size-capped JSON store on disk.

In memory — :func:`memoize`: a thread-safe LRU for engine functions whose arguments identify their result. A
:class:`~analysis.tokenizer.tokenizer.LoadedTokenizer` argument is keyed by its content hash (never by identity), so two
loads of the same file share one entry, and an edited tokenizer (a new object with new content) never reuses
the original's results. Identical concurrent calls run once: the second caller waits for the first and gets the
same object (a Streamlit server with eight sessions pressing the same button computes once). Results are shared
between callers and must be treated as read-only.

On disk — :class:`DiskCache`: JSON documents under ``<cache>/store/<namespace>/<key>.json``, written atomically
and strictly (no NaN), read back with a version check; the whole store is capped at ``$TOKLAB_CACHE_MAX_MB``
(least recently used files go first). A corrupt or foreign file is treated as a miss, never unpickled. A document
that several processes add entries to (a server and a CLI run on one cache) is changed with
:meth:`DiskCache.update`: read, merged and written under a lock that every process on the store shares, so none
drops another's entries; :meth:`DiskCache.stamp` tells a process that another one has written since it last read.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from .outputs import atomic_write_text
from .paths import cache_dir, cache_max_bytes

F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: list[_Memo] = []


def content_key(value: Any) -> Hashable:
    """A hashable key for one argument: a tokenizer by content hash and identity (the hash with its side files'
    settings: a chat template, special tokens), containers element-wise.

    Raises TypeError for values that cannot identify a result (e.g. an open file).
    """
    h = getattr(value, "content_hash", None)
    if isinstance(h, str):
        return ("tokenizer", h, str(getattr(value, "identity", h)))
    if value is None or isinstance(value, (str, bytes, int, float, bool, frozenset)):
        return value
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, *(content_key(v) for v in value))
    if isinstance(value, (set,)):
        return ("set", *sorted(content_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", *sorted((str(k), content_key(v)) for k, v in value.items()))
    if isinstance(value, Hashable):
        return value
    raise TypeError(f"cannot use a {type(value).__name__} as a cache key")


class SingleFlight:
    """Run identical concurrent work once: callers of :meth:`run` with the same key while it is running wait for
    the first caller's result (or error) instead of computing it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[Hashable, Future] = {}

    def run(self, key: Hashable, fn: Callable[[], Any]) -> Any:
        """`fn()`, or the result of the identical call already in progress."""
        with self._lock:
            fut = self._running.get(key)
            owner = fut is None
            if owner:
                fut = self._running[key] = Future()
        if not owner:
            return fut.result()
        try:
            value = fn()
        except BaseException as e:
            with self._lock:
                self._running.pop(key, None)
            fut.set_exception(e)
            raise
        with self._lock:
            self._running.pop(key, None)
        fut.set_result(value)
        return value


class _Memo:
    def __init__(self, fn: Callable[..., Any], maxsize: int) -> None:
        self.fn = fn
        self.maxsize = maxsize
        self.lock = threading.Lock()
        self.done: OrderedDict[Hashable, Any] = OrderedDict()
        self.flight = SingleFlight()
        self.hits = 0
        self.misses = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = (
            tuple(content_key(a) for a in args),
            tuple(sorted((k, content_key(v)) for k, v in kwargs.items())),
        )
        with self.lock:
            if key in self.done:
                self.done.move_to_end(key)
                self.hits += 1
                return self.done[key]
            self.misses += 1

        def compute() -> Any:
            with self.lock:  # an identical call may have finished between the check above and this flight
                if key in self.done:
                    return self.done[key]
            value = self.fn(*args, **kwargs)
            with self.lock:
                self.done[key] = value
                while len(self.done) > self.maxsize:
                    self.done.popitem(last=False)
            return value

        return self.flight.run(key, compute)

    def put(self, args: tuple, value: Any) -> None:
        """Remember `value` as the result of ``fn(*args)`` (a result read back from disk elsewhere)."""
        key = (tuple(content_key(a) for a in args), ())
        with self.lock:
            self.done[key] = value
            self.done.move_to_end(key)
            while len(self.done) > self.maxsize:
                self.done.popitem(last=False)

    def clear(self) -> None:
        with self.lock:
            self.done.clear()

    def forget(self, content_hash: str) -> int:
        """Drop every result computed from a tokenizer with this content hash; returns how many."""
        mark = ("tokenizer", content_hash)
        with self.lock:
            gone = [k for k in self.done if _mentions(k, mark)]
            for k in gone:
                del self.done[k]
        return len(gone)


def _mentions(key: Hashable, mark: tuple[str, str]) -> bool:
    """Whether a :func:`content_key` key (nested tuples) holds a tokenizer with content hash `mark[1]` anywhere."""
    if isinstance(key, tuple) and len(key) == 3 and key[:2] == mark:
        return True
    return isinstance(key, tuple) and any(_mentions(k, mark) for k in key)


def memoize(maxsize: int = 4) -> Callable[[F], F]:
    """Decorator: remember the last `maxsize` results of a function, keyed by :func:`content_key` of its arguments.

    The wrapped function gets ``.cache_clear()``, ``.cache_info()`` (hits, misses, size) and
    ``.cache_put(args, value)`` (remember a result obtained elsewhere, e.g. read back from the disk store).
    """

    def wrap(fn: F) -> F:
        memo = _Memo(fn, maxsize)
        _REGISTRY.append(memo)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return memo(*args, **kwargs)

        wrapper.cache_clear = memo.clear  # type: ignore[attr-defined]
        wrapper.cache_put = memo.put  # type: ignore[attr-defined]
        wrapper.cache_info = lambda: {"hits": memo.hits, "misses": memo.misses, "size": len(memo.done)}  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return wrap


def forget_content(content_hash: str) -> int:
    """Forget every in-memory memoised result computed from the tokenizer with this content hash (the server no
    longer holds that tokenizer: a closed tab's upload); returns how many results were dropped."""
    return sum(m.forget(content_hash) for m in _REGISTRY)


def clear_memory() -> None:
    """Forget every in-memory memoised result (tests, benchmarks)."""
    for m in _REGISTRY:
        m.clear()


# --------------------------------------------------------------------------------------------------
# Disk store
# --------------------------------------------------------------------------------------------------
def store_dir() -> Path:
    """The root of the size-capped disk store (``<cache>/store``)."""
    d = cache_dir() / "store"
    d.mkdir(parents=True, exist_ok=True)
    return d


class DiskCache:
    """JSON documents of one kind (`namespace`) at one format `version`, keyed by a short content key."""

    def __init__(self, namespace: str, version: int | str) -> None:
        self.namespace = namespace
        self.version = str(version)
        #: key → the stamp of the version this process last read with :meth:`read_if_changed` or wrote with
        #: :meth:`update`
        self._seen: dict[str, tuple[int, int, int] | None] = {}
        self._seen_lock = threading.Lock()

    def path(self, key: str) -> Path:
        """The file of one key (the key must be a file-name-safe string such as a hex digest)."""
        safe = "".join(c for c in key if c.isalnum() or c in "-_.")[:200]
        if not safe:
            raise ValueError("empty cache key")
        return store_dir() / self.namespace / f"{safe}.json"

    def get(self, key: str) -> Any | None:
        """The stored document, or None (missing, unreadable, other version)."""
        p = self.path(key)
        try:
            wrapped = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(wrapped, dict) or wrapped.get("version") != self.version or "data" not in wrapped:
            return None
        try:  # least recently *used* goes first: a read sets the access time, the modification time stays the
            # write's (so :meth:`stamp` changes only when the document does)
            os.utime(p, ns=(time.time_ns(), p.stat().st_mtime_ns))
        except OSError:
            pass
        return wrapped["data"]

    def put(self, key: str, data: Any) -> bool:
        """Store a JSON-ready document (strict JSON: NaN is refused); True when written. Never raises on I/O."""
        p = self.path(key)
        try:
            text = json.dumps({"version": self.version, "data": data}, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            return False
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(p, text)
        except OSError:
            return False
        enforce_cap()
        return True

    def stamp(self, key: str) -> tuple[int, int, int] | None:
        """(inode, size, modification time in ns) of a key's file, None when there is none: a write replaces the
        file, so the stamp changes with every write, by this process or another."""
        try:
            st = self.path(key).stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def read_if_changed(self, key: str) -> Any | None:
        """The stored document if it is new to this process — never read here with this method, or written since
        (by another process) — else None. One `stat` when nothing changed: a long-running server that calls it
        before each lookup sees what a CLI run or another server stored since, without reading the file again."""
        stamp = self.stamp(key)
        with self._seen_lock:
            if key in self._seen and self._seen[key] == stamp:
                return None
            self._seen[key] = stamp
        return None if stamp is None else self.get(key)

    def forget_reads(self) -> None:
        """Make :meth:`read_if_changed` read every document again (after a process dropped what it had read)."""
        with self._seen_lock:
            self._seen.clear()

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        """Hold the exclusive lock of one key (``<key>.lock`` beside its file, an advisory `flock` that every
        process on this store takes for :meth:`update`; released when the holder exits, even killed). The lock file
        is opened without following a link and without blocking on a FIFO, and must be a regular file."""
        p = self.path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            p.with_name(p.stem + ".lock"),
            os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
            0o600,
        )
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"the cache lock {p.stem}.lock is not a regular file")
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def update(self, key: str, merge: Callable[[Any | None], Any]) -> tuple[int, int, int] | None:
        """Read, merge and write one document while holding its lock: ``merge(stored)`` gets the stored document
        (None when missing or unreadable) and returns the one to store. Returns the :meth:`stamp` of the document
        written (taken under the lock; :meth:`read_if_changed` then knows it), None when nothing was written;
        never raises on I/O. Two processes that add entries to one document at once both keep theirs (with
        :meth:`put` the last writer's view would replace the other's)."""
        try:
            with self._locked(key):
                if not self.put(key, merge(self.get(key))):
                    return None
                stamp = self.stamp(key)
        except OSError:
            return None
        with self._seen_lock:  # `merge` saw the stored document: nothing in the file is new to this process
            self._seen[key] = stamp
        return stamp

    def clear(self) -> None:
        """Delete every document of this namespace."""
        d = store_dir() / self.namespace
        for p in d.glob("*.json") if d.is_dir() else ():
            p.unlink(missing_ok=True)


_CAP_LOCK = threading.Lock()


def enforce_cap(max_bytes: int | None = None) -> int:
    """Delete the least recently used store files (by their last read or write) until the store fits its cap;
    returns the bytes removed."""
    cap = cache_max_bytes() if max_bytes is None else max_bytes
    with _CAP_LOCK:
        files = []
        total = 0
        for p in store_dir().rglob("*.json"):
            try:
                st = p.stat()
            except OSError:
                continue
            files.append((max(st.st_atime_ns, st.st_mtime_ns), st.st_size, p))  # last read or write
            total += st.st_size
        removed = 0
        if total <= cap:
            return 0
        for _, size, p in sorted(files):
            if total - removed <= cap:
                break
            try:
                p.unlink()
                removed += size
            except OSError:
                pass
        return removed
