"""Memory: pausing Python's cyclic garbage collector while building millions of small objects, one byte-budgeted
LRU of loaded objects (:class:`BudgetCache`) and giving freed memory back to the system (:func:`release_memory`).

The trainer, the corpus jobs' map, reduce and finalize, segmentation and the STT report allocate millions of
tuples, lists and sets and free them by reference counting (they make no reference cycles). With the collector on,
every few thousand allocations trigger a pass, and its full passes re-scan everything the process holds: about half
of a training run's time, and more in a server's large heap.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from .cache import SingleFlight


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (restored afterwards if it was on; nesting is safe)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


# --------------------------------------------------------------------------------------------------
# A process-wide LRU of loaded objects with a byte budget
# --------------------------------------------------------------------------------------------------
class BudgetCache:
    """A thread-safe LRU of loaded objects keyed by content (e.g. a tokenizer's content hash), bounded by an
    estimate of the bytes they hold: adding one evicts the least recently used until the total fits `budget`.

    * :meth:`get` returns the kept object or loads it (identical concurrent loads run once) and keeps it; an object
      larger than the whole budget is kept alone (everything unpinned is evicted). A *pinned* key (the embedded default) is never evicted.
    * Objects are shared by every caller: never mutate one.
    * :meth:`release` drops what no live holder names and nobody used for `idle_s` seconds (the server's closed
      tabs); `on_evict(key, obj)` is called for each object evicted or released (outside the lock), so that work derived
      from it elsewhere can be forgotten too.
    """

    def __init__(
        self,
        budget: int | Callable[[], int],
        *,
        on_evict: Callable[[Hashable, Any], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._budget = budget
        self._on_evict = on_evict
        self._clock = clock
        self._lock = threading.Lock()
        self._flight = SingleFlight()
        #: key → (object, estimated bytes, last use)
        self._items: OrderedDict[Hashable, tuple[Any, int, float]] = OrderedDict()
        self._pinned: set[Hashable] = set()
        self.loads = 0
        self.hits = 0
        self.evictions = 0

    @property
    def budget(self) -> int:
        """The byte budget now (a callable budget is read on every add: a changed setting applies at once)."""
        return int(self._budget() if callable(self._budget) else self._budget)

    def get(self, key: Hashable, load: Callable[[], Any], size: Callable[[Any], int]) -> Any:
        """The object kept under `key`, else `load()`'s (kept, sized by `size(obj)`)."""
        with self._lock:
            got = self._items.get(key)
            if got is not None:
                self._items[key] = (got[0], got[1], self._clock())
                self._items.move_to_end(key)
                self.hits += 1
                return got[0]

        def fresh() -> Any:
            with self._lock:  # kept by a load that finished between the look above and this flight
                got = self._items.get(key)
                if got is not None:
                    return got[0]
            obj = load()
            self.loads += 1
            self.put(key, obj, size(obj))
            return obj

        return self._flight.run(key, fresh)

    def peek(self, key: Hashable) -> Any | None:
        """The kept object (its use refreshed), or None; never loads."""
        with self._lock:
            got = self._items.get(key)
            if got is None:
                return None
            self._items[key] = (got[0], got[1], self._clock())
            self._items.move_to_end(key)
            return got[0]

    def put(self, key: Hashable, obj: Any, nbytes: int) -> None:
        """Keep `obj` under `key` (replacing what was there) and evict the least recently used down to the budget.
        An object larger than the whole budget is still kept, alone with the pinned ones (its users would otherwise
        load it again on every request)."""
        evicted: list[tuple[Hashable, Any]] = []
        with self._lock:
            budget = self.budget
            self._items.pop(key, None)
            self._items[key] = (obj, max(0, int(nbytes)), self._clock())
            total = sum(n for _, n, _ in self._items.values())
            for k in list(self._items):
                if total <= budget:
                    break
                if k == key or k in self._pinned:
                    continue
                gone_obj, n, _ = self._items.pop(k)
                total -= n
                evicted.append((k, gone_obj))
        self._evicted(evicted)

    def pin(self, key: Hashable) -> None:
        """Never evict `key` (it stays until :meth:`unpin`; it still counts against the budget)."""
        with self._lock:
            self._pinned.add(key)

    def unpin(self, key: Hashable) -> None:
        """Let `key` be evicted again."""
        with self._lock:
            self._pinned.discard(key)

    def discard(self, key: Hashable) -> bool:
        """Forget one object (True when it was kept)."""
        with self._lock:
            got = self._items.pop(key, None)
        if got is not None:
            self._evicted([(key, got[0])])
        return got is not None

    def release(self, held: set[Hashable], idle_s: float = 0.0) -> list[Hashable]:
        """Drop every unpinned object that no live holder names (`held`) and that was not used in the last
        `idle_s` seconds; returns the keys dropped."""
        now = self._clock()
        with self._lock:
            keys = [k for k, (_, _, used) in self._items.items()
                    if k not in held and k not in self._pinned and now - used >= idle_s]  # fmt: skip
            gone = [(k, self._items.pop(k)[0]) for k in keys]
        self._evicted(gone)
        return keys

    def clear(self) -> None:
        """Forget everything, pinned objects included (tests, benchmarks)."""
        with self._lock:
            gone = [(k, obj) for k, (obj, _, _) in self._items.items()]
            self._items.clear()
            self._pinned.clear()
        self._evicted(gone)

    def keys(self) -> list[Hashable]:
        """The kept keys, least recently used first."""
        with self._lock:
            return list(self._items)

    def nbytes(self) -> int:
        """The estimated bytes of everything kept."""
        with self._lock:
            return sum(n for _, n, _ in self._items.values())

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def _evicted(self, gone: list[tuple[Hashable, Any]]) -> None:
        self.evictions += len(gone)
        if self._on_evict is not None:
            for k, obj in gone:
                self._on_evict(k, obj)


def release_memory() -> None:
    """Give freed memory back to the operating system: a full garbage collection (objects in reference cycles),
    Apache Arrow's memory pool (where a process has loaded pyarrow: Streamlit serializes every table through it,
    and its default pool, mimalloc or jemalloc, keeps what it freed), then glibc's `malloc_trim` (free pages at
    the top and inside the heap; elsewhere a no-op). Call after large objects were dropped (closed sessions), not
    on every request: the collection scans the whole heap."""
    gc.collect()
    arrow = sys.modules.get(
        "pyarrow"
    )  # never imported here: only a process that uses it has a pool to give back
    if arrow is not None:
        with contextlib.suppress(Exception):  # an old pyarrow without release_unused, a pool that cannot
            arrow.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


_TRIM: list[Any] = []

#: glibc's `mallopt` parameter for the most malloc arenas (malloc.h's M_ARENA_MAX).
_M_ARENA_MAX = -8
#: Arenas for a long-running server: glibc's default (8 per core) lets each of Streamlit's script threads fill an
#: arena of its own, whose free pages between live objects are never given back. Measured (bench_users, 2 users
#: repeating the journey for 9 minutes, two servers side by side): RSS grew 12.2 % with the default, 1.3 % with 2.
SERVER_ARENAS = 2


def limit_malloc_arenas(n: int = SERVER_ARENAS) -> bool:
    """Cap glibc's malloc arenas at `n` for this process (and, through ``MALLOC_ARENA_MAX``, the processes it
    starts), before its threads start; True when the cap was set. Nothing is changed where the operator set
    ``MALLOC_ARENA_MAX`` (glibc read it at start) or the C library is not glibc."""
    if os.environ.get("MALLOC_ARENA_MAX") or not _mallopt(_M_ARENA_MAX, n):
        return False
    os.environ["MALLOC_ARENA_MAX"] = str(n)
    return True


#: glibc's `mallopt` parameter for the allocation size from which malloc maps memory of its own (M_MMAP_THRESHOLD).
_M_MMAP_THRESHOLD = -3
#: A server's fixed mmap threshold: every allocation from 256 KiB up (a tokenizer.json's bytes, vocabulary arrays,
#: serialized tables) is mapped on its own and unmapped when freed. glibc's default threshold starts at 128 KiB and
#: rises after each large free up to 32 MiB, so a server that loaded and dropped big tokenizers then kept such
#: buffers in its heap, between live objects. Measured (8 sessions × 3 uploads in one process, the same code as
#: the server's, then every session closed): RSS left +22 % over the baseline with the default, +11 % with this.
SERVER_MMAP_THRESHOLD = 256 * 1024


def fix_mmap_threshold(n: int = SERVER_MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `n` bytes for this process (not the processes it starts: the job workers keep
    glibc's adaptive default, which suits their big numeric work); True when set. Nothing is changed where the
    operator set ``MALLOC_MMAP_THRESHOLD_`` or the C library is not glibc."""
    return not os.environ.get("MALLOC_MMAP_THRESHOLD_") and _mallopt(_M_MMAP_THRESHOLD, n)


def _mallopt(param: int, value: int) -> bool:
    """glibc's `mallopt(param, value)` for this process; False where it failed or the C library has none."""
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return fn(param, value) == 1


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none (macOS, musl)."""
    if not _TRIM:
        try:
            fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
            fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
        except (OSError, AttributeError):
            fn = None
        _TRIM.append(fn)
    return _TRIM[0]
