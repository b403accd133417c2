"""The engine's one way to build millions of small objects quickly: pause Python's cyclic garbage collector.

The trainer, the corpus jobs' map, reduce and finalize, segmentation and the STT report allocate millions of
tuples, lists and sets and free them by reference counting (they make no reference cycles). With the collector on,
every few thousand allocations trigger a pass, and its full passes re-scan everything the process holds: about half
of a training run's time, and more in a server's large heap.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


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
