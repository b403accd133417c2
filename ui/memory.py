"""The server's loaded tokenizers: one process-wide LRU keyed by identity, with a byte budget.

Session State never holds a tokenizer: a library entry is a :class:`TokenizerRef` (its name, identity and how to
load it again). :func:`resolve` turns a reference into a `LoadedTokenizer` from :data:`TOKENIZERS` — one object per
identity for the whole server, so eight tabs that upload the same file hold it once — and loads it again on
demand (from the example folder, the hub cache or the session's workspace store) after it was evicted.

* The budget is ``$TOKLAB_MEMORY_MB`` (:func:`analysis.core.paths.memory_budget_bytes`); each tokenizer counts
  :data:`SIZE_FACTOR` × its tokenizer.json bytes (measured: the parsed document, the Rust tokenizer and the views a
  page reads take 16–24× the file). The least recently used go first; the embedded default is pinned.
* An identity is the content hash of tokenizer.json plus a digest of the side files' settings
  (:attr:`analysis.LoadedTokenizer.identity`): two folders with the same tokenizer.json but another chat template are
  two objects, never one under two names.
* Each session names the identities its library uses (:func:`hold`); when its tab has closed (`ui.sessions`
  reaps it), :func:`release_unheld` drops what no live session names, together with the Rust tokenizer and the
  memoised engine results computed from it (`on_evict`).
* Cached objects are shared by every session: never mutate one (edits build new objects).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace

from analysis import LoadedTokenizer
from analysis.core import paths
from analysis.core.cache import forget_content
from analysis.core.memory import BudgetCache
from analysis.tokenizer import shared

#: Estimated bytes in memory per byte of tokenizer.json (parsed document + Rust tokenizer + vocabulary views):
#: Llama-3.1 (8.9 MB file) measured 16× loaded and 24× once its views were read, Gemma (17 MB) 12× and 20×.
SIZE_FACTOR = 20
#: Most differently named views of one tokenizer kept with it (each shares the bytes and derived views).
MAX_VIEWS = 16
#: An object not named by any live session is kept at least this long after its last use (a page that loaded it
#: but has not added it to its library yet keeps it).
RELEASE_IDLE_S = 30.0


class _Entry:
    """One identity's shared tokenizer and its named views (same bytes and settings, other name or source label)."""

    def __init__(self, base: LoadedTokenizer) -> None:
        self.base = base
        self.views: OrderedDict[tuple[str, str], LoadedTokenizer] = OrderedDict()
        self.lock = threading.Lock()

    def named(self, name: str, source: str) -> LoadedTokenizer:
        if (name, source) == (self.base.name, self.base.source):
            return self.base
        with self.lock:
            view = self.views.get((name, source))
            if view is None:
                view = self.views[(name, source)] = self.base.with_source(name=name, source=source)
                while len(self.views) > MAX_VIEWS:
                    self.views.popitem(last=False)
            else:
                self.views.move_to_end((name, source))
            return view


def _forget(key: Hashable, entry: _Entry) -> None:
    """An entry left the LRU: forget the Rust tokenizer and the memoised engine results computed from its bytes."""
    shared.SHARED.forget(entry.base.digest)
    forget_content(entry.base.content_hash)


def estimate(tok: LoadedTokenizer) -> int:
    """Estimated bytes one loaded tokenizer holds (:data:`SIZE_FACTOR` × its tokenizer.json)."""
    return tok.nbytes * SIZE_FACTOR


#: The one process-wide LRU of loaded tokenizers: identity → :class:`_Entry`.
TOKENIZERS = BudgetCache(paths.memory_budget_bytes, on_evict=_forget)


def keep(tok: LoadedTokenizer, *, pin: bool = False) -> LoadedTokenizer:
    """Put a freshly loaded tokenizer in the LRU; returns the server's object for its bytes under its own name and
    source (an object already kept for the same bytes is reused and `tok` dropped)."""
    key = tok.identity
    entry = TOKENIZERS.peek(key)
    if entry is None:
        entry = _Entry(tok)
        if pin:
            TOKENIZERS.pin(key)
        TOKENIZERS.put(key, entry, estimate(tok))
    elif pin:
        TOKENIZERS.pin(key)
    return entry.named(tok.name, tok.source)


def kept(identity: str, name: str, source: str) -> LoadedTokenizer | None:
    """The kept tokenizer with this identity (:attr:`LoadedTokenizer.identity`), under `name` and `source`, or None
    (never loads)."""
    entry = TOKENIZERS.peek(identity)
    return None if entry is None else entry.named(name, source)


@dataclass(frozen=True)
class TokenizerRef:
    """What a session's library holds for one entry: never the tokenizer, only how to get it.

    `origin`: a shareable source (``embedded:``, ``example:NAME``, ``hub:ID``, ``path:/dir``) or ``ws:`` (the
    entry `item` of workspace `ws`: an upload or an edit). `pinned` holds the object itself only when nothing can
    load it again (an edit in a tab whose workspace store is unavailable)."""

    identity: str
    name: str
    source: str
    origin: str
    ws: str = ""
    item: str = ""
    pinned: LoadedTokenizer | None = field(default=None, compare=False, repr=False)

    def renamed(self, name: str, item: str | None = None) -> TokenizerRef:
        """The same entry under another name (and workspace item name)."""
        return replace(self, name=name, item=self.item if item is None else item)


def reference(tok: LoadedTokenizer, origin: str | None, ws: str = "", item: str = "") -> TokenizerRef:
    """A reference to `tok` (which should be :func:`keep`'s object): by its shareable `origin`, else by its
    workspace item, else (nothing can load it again) holding the object."""
    if origin:
        return TokenizerRef(tok.identity, tok.name, tok.source, origin)
    if ws and item:
        return TokenizerRef(tok.identity, tok.name, tok.source, "ws:", ws, item)
    return TokenizerRef(tok.identity, tok.name, tok.source, "", pinned=tok)


#: How a reference is loaded again: `ui.library` installs its loaders (source strings, workspace items) here.
RELOADERS: dict[str, Callable[[TokenizerRef], LoadedTokenizer]] = {}


class _Changed(Exception):
    """A reference's origin now holds other bytes (an example folder was edited)."""

    def __init__(self, tok: LoadedTokenizer) -> None:
        super().__init__(tok.identity)
        self.tok = tok


def resolve(ref: TokenizerRef) -> LoadedTokenizer:
    """The tokenizer a reference names: the server's kept object, else loaded again (once, however many tabs ask
    at the same time) and kept."""
    if ref.pinned is not None:
        return ref.pinned
    reload = RELOADERS["ws:" if ref.origin == "ws:" else "source"]

    def load_entry() -> _Entry:
        tok = reload(ref)
        if tok.identity != ref.identity:
            raise _Changed(tok)
        return _Entry(tok)

    try:
        entry = TOKENIZERS.get(ref.identity, load_entry, lambda e: estimate(e.base))
    except _Changed as e:  # what its origin holds now, under this entry's name
        return keep(e.tok).with_source(name=ref.name, source=ref.source)
    return entry.named(ref.name, ref.source)


# ---------------------------------------------------------------------------------------------- holders
_HOLDERS: dict[str, frozenset[str]] = {}
_HOLDERS_LOCK = threading.Lock()


def hold(session_id: str, identities: Iterable[str]) -> None:
    """Record the tokenizers (identities) a session's library names now (replacing what it named before)."""
    with _HOLDERS_LOCK:
        _HOLDERS[session_id] = frozenset(identities)


def holders() -> dict[str, frozenset[str]]:
    """Session id → the identities it holds (a copy)."""
    with _HOLDERS_LOCK:
        return dict(_HOLDERS)


def release_unheld(live_sessions: Iterable[str], idle_s: float = RELEASE_IDLE_S) -> list[Hashable]:
    """Forget the holders of sessions that are gone, then drop every tokenizer that no live session holds and that
    was not used for `idle_s` seconds; returns the identities dropped."""
    live = set(live_sessions)
    with _HOLDERS_LOCK:
        for sid in [s for s in _HOLDERS if s not in live]:
            del _HOLDERS[sid]
        held = set().union(*_HOLDERS.values()) if _HOLDERS else set()
    return TOKENIZERS.release(held, idle_s)
