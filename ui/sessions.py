"""Closed tabs give their memory back: one background thread per server process (:func:`start_reaper`).

Streamlit 1.67 keeps a session whose websocket went away in a reconnect store for ``server.disconnectedSessionTTL``
seconds (this app's `.streamlit/config.toml` sets 60), but that store only *hides* an expired session: it is
dropped from memory at the store's next write, and never shut down — its uploaded files stay in the uploaded-file
manager for the life of the process (streamlit#12506: closed tabs' state kept). Every :data:`INTERVAL_S` seconds the
reaper here:

1. closes each disconnected session once it has been away for the TTL (less one interval, so that it is closed
   before the store hides it) through :meth:`Runtime.clear_user_info_for_session` — public, thread-safe, and for a
   stored session it marks it non-resumable and closes it on the event loop (script thread stopped, uploaded
   files and media released); a tab that comes back later opens a new session on its workspace link and loses
   nothing;
2. removes uploaded files of sessions that no longer exist (those the store dropped before we saw them);
3. drops the loaded tokenizers that no live session holds (`ui.memory.release_unheld`), with their Rust tokenizers
   and memoised results;
4. after anything was freed, runs a full garbage collection and returns free heap pages to the system
   (:func:`analysis.core.memory.release_memory`).

Nothing here keeps a session object: sessions are looked up by id on each pass.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from streamlit import config
from streamlit.runtime import Runtime

from analysis.core.memory import release_memory
from ui import memory

#: Seconds between two passes.
INTERVAL_S = 5.0
_LOG = logging.getLogger(__name__)
_STARTED: list[threading.Thread] = []
_START_LOCK = threading.Lock()


def session_ttl() -> float:
    """Seconds a disconnected session may be resumed (Streamlit's ``server.disconnectedSessionTTL``)."""
    try:
        return float(config.get_option("server.disconnectedSessionTTL"))
    except (KeyError, TypeError, ValueError, RuntimeError):
        return 120.0


@dataclass
class Reaper:
    """One pass at a time over a runtime's sessions (see the module's description); `away` remembers since when
    each disconnected session id has been seen disconnected."""

    ttl: float
    clock: Any = time.monotonic
    away: dict[str, float] = field(default_factory=dict)
    closed: int = 0
    released: int = 0

    def sweep(self, runtime: Runtime) -> bool:
        """One pass; True when anything was freed."""
        mgr = getattr(runtime, "_session_mgr", None)  # Runtime has no public listing of its sessions
        if mgr is None:
            return False
        infos = mgr.list_sessions()
        ids = {i.session.id for i in infos}
        now = self.clock()
        freed = False
        grace = max(0.0, self.ttl - INTERVAL_S)
        for sid in sorted(ids):
            if runtime.is_active_session(sid):
                self.away.pop(sid, None)
                continue
            since = self.away.setdefault(sid, now)
            if now - since >= grace:
                runtime.clear_user_info_for_session(
                    sid
                )  # stored session: non-resumable, closed on the event loop
                self.away.pop(sid, None)
                ids.discard(sid)
                self.closed += 1
                freed = True
        for sid in [s for s in self.away if s not in ids]:
            del self.away[sid]
        freed |= self._drop_orphan_uploads(runtime, ids)
        gone = memory.release_unheld(ids)
        self.released += len(gone)
        return freed or bool(gone)

    @staticmethod
    def _drop_orphan_uploads(runtime: Runtime, ids: set[str]) -> bool:
        """Remove the uploaded files of sessions that no longer exist; True when any were removed."""
        mgr = runtime.uploaded_file_mgr
        storage = getattr(mgr, "file_storage", None)  # the in-memory manager keeps them by session id
        if not isinstance(storage, dict):
            return False
        orphans = [sid for sid in list(storage) if sid not in ids]
        for sid in orphans:
            mgr.remove_session_files(sid)
        return bool(orphans)


def _run(reaper: Reaper) -> None:
    while True:
        time.sleep(INTERVAL_S)
        if not Runtime.exists():
            continue
        try:
            if reaper.sweep(Runtime.instance()):
                release_memory()
        except Exception:  # noqa: BLE001 (a changed store mid-pass, a runtime stopping: the next pass tries again)
            _LOG.debug("session reaper pass failed", exc_info=True)


def start_reaper() -> None:
    """Start the reaper thread once per process (app.py calls it on every run; later calls cost a lock). Not
    started without a server runtime (AppTest runs scripts without one)."""
    with _START_LOCK:
        if _STARTED or not Runtime.exists():
            return
        t = threading.Thread(
            target=_run, args=(Reaper(session_ttl()),), name="toklab-session-reaper", daemon=True
        )
        t.start()
        _STARTED.append(t)
