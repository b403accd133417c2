"""Work done once per process for one tokenizer.json text and shared by every view of those bytes
(:class:`SharedViews`: the Rust tokenizer, the read-only views computed from it, the fact that the document passed
its check), bounded by :data:`SHARED_MAX_BYTES` and :data:`SHARED_MAX_COUNT`; :func:`clear_shared` forgets it all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import tokenizers

from analysis.core.cache import SingleFlight

#: in all (about 3–9× that in memory) and :data:`SHARED_MAX_COUNT` tokenizers; the least recently used go first.
SHARED_MAX_BYTES = 32 << 20
SHARED_MAX_COUNT = 6
#: How many digests of documents that passed :func:`check_document` this process remembers.
CHECKED_MAX = 4096


class SharedViews:
    """Work done once per process for one tokenizer.json text, by the SHA-256 of its bytes: the Rust tokenizer
    (shared by every view of those bytes; it is never mutated, :meth:`LoadedTokenizer.fresh_tokenizer` makes
    private copies) and the fact that the document passed :func:`check_document`. Loading the same file again (a
    second test, a second session's upload, a reload after an export) then costs a hash instead of parsing,
    checking and building: 1.0 s → a few ms for Llama-3.1's 9 MB tokenizer.json on two cores."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flight = SingleFlight()  # two views of the same new bytes at once build it once
        self._built: OrderedDict[str, tuple[int, tokenizers.Tokenizer]] = OrderedDict()
        self._checked: OrderedDict[str, None] = OrderedDict()
        #: read-only views computed from a kept tokenizer (its vocabulary, added tokens, id → token), by digest
        self._views: dict[str, dict[str, Any]] = {}

    def tokenizer(
        self, digest: str, size: int, build: Callable[[], tokenizers.Tokenizer]
    ) -> tokenizers.Tokenizer:
        """The Rust tokenizer built for these bytes in this process, or `build()`'s, kept for the next view."""
        with self._lock:
            got = self._built.get(digest)
            if got is not None:
                self._built.move_to_end(digest)
                return got[1]
        # outside the lock (building takes up to seconds); a twin arriving meanwhile (the server's warm-up and a
        # first visitor, two sessions opening one upload) waits for this build instead of building it again
        return self._flight.run(digest, lambda: self._build_and_keep(digest, size, build))

    def _build_and_keep(
        self, digest: str, size: int, build: Callable[[], tokenizers.Tokenizer]
    ) -> tokenizers.Tokenizer:
        with self._lock:
            got = self._built.get(digest)  # kept by a flight that ended between our look and ours starting
            if got is not None:
                return got[1]
        tok = build()
        if size <= SHARED_MAX_BYTES:
            with self._lock:
                self._built[digest] = (size, tok)
                self._built.move_to_end(digest)
                total = sum(n for n, _ in self._built.values())
                while len(self._built) > SHARED_MAX_COUNT or total > SHARED_MAX_BYTES:
                    gone, (n, _) = self._built.popitem(last=False)
                    self._views.pop(gone, None)
                    total -= n
        return tok

    def view(self, digest: str, name: str, build: Callable[[], Any]) -> Any:
        """A read-only view of a kept tokenizer (`name`: vocab, added tokens, …), computed once while the tokenizer
        is kept; `build()`'s value, not kept, for one that is not."""
        with self._lock:
            views = self._views.get(digest) if digest in self._built else None
            if views is not None and name in views:
                return views[name]
        value = build()
        with self._lock:
            if digest in self._built:
                self._views.setdefault(digest, {})[name] = value
        return value

    def forget(self, digest: str) -> bool:
        """Drop the Rust tokenizer and views kept for these bytes (True when there were any); the document check
        is still remembered."""
        with self._lock:
            self._views.pop(digest, None)
            return self._built.pop(digest, None) is not None

    def was_checked(self, digest: str) -> bool:
        """Whether a document with these bytes passed :func:`check_document` in this process."""
        with self._lock:
            return digest in self._checked

    def mark_checked(self, digest: str) -> None:
        """Remember that a document with these bytes passed :func:`check_document`."""
        with self._lock:
            self._checked[digest] = None
            while len(self._checked) > CHECKED_MAX:
                self._checked.popitem(last=False)


SHARED = SharedViews()


def clear_shared() -> None:
    """Forget the Rust tokenizers and document checks this process shares between views of the same bytes (the
    next load of any file builds and checks it again; for benchmarks of a first load)."""
    global SHARED
    SHARED = SharedViews()
