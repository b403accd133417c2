"""A protocol-level Streamlit client for the benchmarks: one simulated user without a browser.

It speaks the pinned Streamlit's websocket protocol (`/_stcore/stream`, protobuf `BackMsg` up, `ForwardMsg` down) as
the browser's frontend does: a new connection is a new session (and so a new workspace), a rerun carries the
page, the query string the server last set and the widget values the user changed. A step is timed from the
message sent to the server's "script finished" for that run — the server's side of a step, without the browser's
drawing (which `bench_users.py`'s browser contexts measure, and which costs a 2-core machine more CPU than the
server itself). Used where chromium runs out: many light users at once.

What a step waits for is a condition on what the server sent (the run finished; the typed text seen in the page's
elements), never a pause; every wait has a time limit. An exception box or an error alert in a run is an error.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
from dataclasses import dataclass, field

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import ClientConnection, connect

FINISHED = ForwardMsg.ScriptFinishedStatus
ALERT_ERROR = 1  # streamlit.proto.Alert_pb2.Alert.Format.ERROR
TAG = re.compile(r"<[^>]*>")


class ProtocolError(Exception):
    """A step that failed: the server closed the connection, a run showed an error, or a wait ran out."""


@dataclass
class RunSeen:
    """What one script run sent: its elements' text (an HTML element's as its text, without the tags: what a reader
    sees) and any error shown."""

    texts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def has(self, marker: str) -> bool:
        """Whether any element of the run shows `marker`."""
        return any(marker in t for t in self.texts)


class ProtocolUser:
    """One session of the app over its websocket (see the module docstring).

    `await u.open()` connects and waits for the first run; `await u.switch(path)` opens another page by its URL
    path; `await u.set_text(key, text)` types into a text widget (by its `key=`) and waits for the rerun.
    """

    def __init__(self, base: str, timeout_s: float = 120.0) -> None:
        self.base = base.rstrip("/")
        self.timeout_s = timeout_s
        self.ws: ClientConnection | None = None
        self.query = ""
        self.page_hash = ""
        self.pages: dict[str, str] = {}  # url path → page script hash
        self.widgets: dict[str, str] = {}  # user key → widget id (as last drawn)
        self.values: dict[str, WidgetState] = {}  # widget id → the value this user set

    async def open(self, path: str = "") -> RunSeen:
        """Connect (a new session) and wait for the first run of `path` (the default page when empty)."""
        url = self.base.replace("http://", "ws://", 1) + "/_stcore/stream"
        self.ws = await asyncio.wait_for(
            connect(url, subprotocols=["streamlit"], max_size=None, open_timeout=self.timeout_s),
            self.timeout_s,
        )
        return await self._run(page_name=path)

    async def switch(self, path: str) -> RunSeen:
        """Open the page whose URL path is `path` (as a click in the top bar does)."""
        if path not in self.pages:
            raise ProtocolError(f"no page at /{path} (pages: {sorted(self.pages)})")
        self.page_hash = self.pages[path]
        return await self._run(page_name=path)

    async def set_text(self, key: str, text: str, *, marker: str | None = None) -> RunSeen:
        """Set the text widget `key` to `text` (committed, as Ctrl+Enter does) and wait for the run; with `marker`,
        until a run has sent an element holding it."""
        wid = self.widgets.get(key)
        if wid is None:
            raise ProtocolError(f"no widget with key {key!r} on this page")
        self.values[wid] = WidgetState(id=wid, string_value=text)
        seen = await self._run()
        if marker is not None and not seen.has(marker):
            raise ProtocolError(f"the run after typing did not draw {marker!r}")
        return seen

    async def close(self) -> None:
        """Close the connection (the tab closes)."""
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    # -- the protocol
    def _client_state(self, page_name: str) -> ClientState:
        state = ClientState(query_string=self.query, page_script_hash=self.page_hash, page_name=page_name)
        state.widget_states.widgets.extend(self.values.values())
        state.context_info.timezone = "UTC"
        state.context_info.locale = "en-US"
        state.context_info.url = f"{self.base}/{page_name}" + (f"?{self.query}" if self.query else "")
        return state

    async def _run(self, page_name: str | None = None) -> RunSeen:
        """Send a rerun (none on a fresh connection: the server runs the page by itself… only when asked: the
        frontend always asks) and read until that run has finished successfully."""
        if self.ws is None:
            raise ProtocolError("not connected")
        msg = BackMsg()
        msg.rerun_script.CopyFrom(self._client_state(page_name if page_name is not None else self._path()))
        await self.ws.send(msg.SerializeToString())
        try:
            return await asyncio.wait_for(self._until_finished(), self.timeout_s)
        except TimeoutError:
            raise ProtocolError(f"no finished run within {self.timeout_s:.0f} s") from None

    def _path(self) -> str:
        return next((p for p, h in self.pages.items() if h == self.page_hash), "")

    async def _until_finished(self) -> RunSeen:
        seen = RunSeen()
        assert self.ws is not None
        while True:
            try:
                raw = await self.ws.recv()
            except Exception as e:  # noqa: BLE001 - a closed connection is the step's error
                raise ProtocolError(f"the connection closed: {type(e).__name__}: {e}") from None
            if isinstance(raw, str):
                continue
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            kind = fm.WhichOneof("type")
            if kind == "new_session":
                self._pages(fm.new_session.app_pages)
                if fm.new_session.page_script_hash:
                    self.page_hash = fm.new_session.page_script_hash
                self.widgets.clear()
            elif kind == "navigation":
                self._pages(fm.navigation.app_pages)
                if fm.navigation.page_script_hash:
                    self.page_hash = fm.navigation.page_script_hash
            elif kind == "page_info_changed":
                self.query = fm.page_info_changed.query_string
            elif kind == "delta":
                self._element(fm, seen)
            elif kind == "script_finished":
                status = fm.script_finished
                if status == FINISHED.FINISHED_SUCCESSFULLY:
                    if seen.errors:
                        raise ProtocolError("; ".join(seen.errors)[:300])
                    return seen
                if status == FINISHED.FINISHED_WITH_COMPILE_ERROR:
                    raise ProtocolError("the page failed to compile")
                # FINISHED_EARLY_FOR_RERUN (st.rerun, or our own next message) or a fragment's run: read on

    def _pages(self, pages) -> None:
        for p in pages:
            self.pages[p.url_pathname] = p.page_script_hash

    def _element(self, fm: ForwardMsg, seen: RunSeen) -> None:
        delta = fm.delta
        if delta.WhichOneof("type") != "new_element":
            return
        el = delta.new_element
        kind = el.WhichOneof("type")
        if kind == "html":
            seen.texts.append(html.unescape(TAG.sub("", el.html.body)))
        else:
            seen.texts.append(el.SerializeToString().decode("utf-8", errors="replace"))
        if kind == "exception":
            seen.errors.append(f"{el.exception.type}: {el.exception.message}")
        elif kind == "alert" and el.alert.format == ALERT_ERROR:
            seen.errors.append(el.alert.body)
        elif kind is not None:
            wid = getattr(getattr(el, kind), "id", "")
            parts = wid.split("-", 2) if isinstance(wid, str) else []
            if len(parts) == 3 and parts[0] == "$$ID" and parts[2] != "None":  # "$$ID-<hash>-<key>"
                self.widgets[parts[2]] = wid


async def timed(coro) -> float:
    """Seconds `coro` took (it raises on failure)."""
    t0 = time.perf_counter()
    await coro
    return time.perf_counter() - t0
