"""Memory in the app: Session State holds references, loaded tokenizers live once per content in the server's
byte-budgeted LRU (`ui.memory`) and are loaded again on demand, and a closed tab's session is shut down and what
only it used is released (`ui.sessions`, with the pinned Streamlit's own Runtime and session manager)."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import weakref
from unittest.mock import MagicMock

import pytest
from app_support import open_page
from streamlit.runtime import Runtime, RuntimeConfig
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.runtime.memory_session_storage import MemorySessionStorage
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec
from support import ROOT, TOKENIZERS

from analysis import LoadedTokenizer
from analysis.tokenizer.alphabets import BYTE_TO_CHAR
from analysis.tokenizer.document import bpe_model
from analysis.tokenizer.sources import load_upload
from ui import memory
from ui.memory import TOKENIZERS as LRU
from ui.memory import TokenizerRef, resolve
from ui.sessions import Reaper

GPT2 = (TOKENIZERS / "gpt2" / "tokenizer.json").read_bytes()
#: A 256-token byte-level BPE tokenizer.json: Load & inspect draws it in a fraction of gpt2's time.
TINY = json.dumps({
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "post_processor": None,
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": bpe_model({c: i for i, c in enumerate(BYTE_TO_CHAR.values())}, []),
}).encode()  # fmt: skip


def _upload(at, data: bytes, name: str) -> None:
    at.file_uploader(key="inspect-upload").set_value(("tokenizer.json", data, "application/json"))
    at.text_input(key="inspect-upload-name").set_value(name)
    at.run()
    at.button(key="inspect-add-upload").click().run()
    assert not at.exception, [e.message for e in at.exception]


def _tokenizers_in(state) -> list[str]:
    """Keys of Session State whose value is, or directly contains, a tokenizer object."""
    out = []
    for k in state:
        v = state[k]
        values = v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple, set)) else [v]
        if any(isinstance(x, LoadedTokenizer) for x in values):
            out.append(k)
    return out


@pytest.mark.slow
def test_sessions_hold_references_and_share_one_object_per_content():
    """Two tabs (two workspaces) upload the same bytes: Session State holds references only, the server holds one
    object for those bytes, and an evicted entry is loaded again from the tab's workspace store on demand."""
    a = open_page("pages/inspect.py")
    b = open_page("pages/inspect.py")
    _upload(a, TINY, "mine")
    _upload(b, TINY, "mine")
    ref_a, ref_b = a.session_state["toklab_library"]["mine"], b.session_state["toklab_library"]["mine"]
    assert isinstance(ref_a, TokenizerRef) and ref_a.pinned is None and ref_a.origin == "ws:"
    assert ref_a.ws != ref_b.ws and ref_a.identity == ref_b.identity
    assert resolve(ref_a) is resolve(ref_b)  # one object for both workspaces
    assert _tokenizers_in(a.session_state) == [] and _tokenizers_in(b.session_state) == []
    # evicted (another tab's big load, a small budget): the next run loads it again from the store
    loads = LRU.loads
    assert LRU.discard(ref_a.identity)
    a.run()
    assert not a.exception, [e.message for e in a.exception]
    assert ref_a.identity in LRU and LRU.loads == loads + 1  # loaded again, once
    assert resolve(ref_a).identity == ref_a.identity and resolve(ref_a).name == "mine"
    assert a.selectbox(key="inspect-pick").value == "mine"


def test_the_same_bytes_are_kept_once_within_the_budget(monkeypatch):
    LRU.clear()  # what other tests of the process left (pinned entries too): they load again on demand
    tok = load_upload("tokenizer.json", GPT2)
    LRU.discard(tok.identity)
    first = memory.keep(load_upload("tokenizer.json", GPT2).with_source(name="one"))
    second = memory.keep(load_upload("tokenizer.json", GPT2).with_source(name="one"))
    assert first is second and tok.identity in LRU  # the second load of the same bytes is dropped
    monkeypatch.setenv("TOKLAB_MEMORY_MB", "45")  # gpt2 counts 2.1 MB × 20, bert 0.47 MB × 20: gpt2 goes
    bert = memory.keep(
        load_upload("tokenizer.json", (TOKENIZERS / "bert-base-uncased" / "tokenizer.json").read_bytes())
    )
    assert bert.identity in LRU and tok.identity not in LRU
    LRU.discard(bert.identity)


def test_the_same_bytes_with_other_settings_are_two_objects():
    """Two folders with one tokenizer.json and two chat templates: the LRU keeps two objects, each with its own
    template (a template under test was once rendered as the cached example's, whose bytes it shared)."""
    raw = (TOKENIZERS / "smollm2-135m-instruct" / "tokenizer.json").read_bytes()
    plain = memory.keep(LoadedTokenizer.from_json_text(raw, "plain", config={"chat_template": "{{ 'a' }}"}))
    other = memory.keep(LoadedTokenizer.from_json_text(raw, "other", config={"chat_template": "{{ 'b' }}"}))
    assert plain.content_hash == other.content_hash and plain.identity != other.identity
    assert (plain.config["chat_template"], other.config["chat_template"]) == ("{{ 'a' }}", "{{ 'b' }}")
    assert (
        memory.keep(
            LoadedTokenizer.from_json_text(raw, "again", config={"chat_template": "{{ 'b' }}"})
        ).config["chat_template"]
        == "{{ 'b' }}"
    )
    for t in (plain, other):
        LRU.discard(t.identity)


def _run(loop: asyncio.AbstractEventLoop, aw):
    """`loop.run_until_complete(aw)` on a thread of its own: the test process may already run an event loop on
    its main thread (the browser tests' Playwright, when they ran before in the same process)."""
    out: dict = {}

    def go() -> None:
        try:
            out["value"] = loop.run_until_complete(aw)
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out["error"] = e

    t = threading.Thread(target=go)
    t.start()
    t.join(120)
    if "error" in out:
        raise out["error"]
    return out.get("value")


@pytest.fixture
def runtime(monkeypatch):
    """A started Streamlit Runtime of the pinned version (its own session manager, reconnect store and uploaded
    file manager), with a 60 s reconnect TTL; no script is run."""
    monkeypatch.setattr(Runtime, "_instance", None)
    files = MemoryUploadedFileManager("/_stcore/upload_file")
    loop = asyncio.new_event_loop()
    rt = Runtime(RuntimeConfig(script_path=str(ROOT / "app.py"), media_file_storage=MemoryMediaFileStorage("/media"),
                               uploaded_file_manager=files, session_storage=MemorySessionStorage(ttl_seconds=60)))  # fmt: skip
    _run(loop, rt.start())
    yield rt, files, loop
    rt.stop()
    _run(loop, rt.stopped)
    loop.close()


def test_a_closed_tab_is_shut_down_and_what_only_it_used_is_released(runtime):
    rt, files, loop = runtime
    bert = (TOKENIZERS / "bert-base-uncased" / "tokenizer.json").read_bytes()

    async def connect() -> tuple[str, str]:  # sessions are made on the runtime's event loop
        return rt.connect_session(client=MagicMock(), user_info={}), rt.connect_session(
            client=MagicMock(), user_info={}
        )

    gone_tab, open_tab = _run(loop, connect())
    files.add_file(gone_tab, UploadedFileRec(file_id="f", name="t.json", type="application/json", data=GPT2))
    # bytes no other test of the run loads (a trailing newline): another test's gpt2 may be held by its own caches
    only_gone = memory.keep(
        load_upload("tokenizer.json", GPT2 + b"\n").with_source(name="closed tab's upload")
    )
    shared = memory.keep(load_upload("tokenizer.json", bert))
    memory.hold(gone_tab, {only_gone.identity, shared.identity})
    memory.hold(open_tab, {shared.identity})
    session = weakref.ref(rt.get_app_session(gone_tab))
    obj = weakref.ref(LRU.peek(only_gone.identity).base)
    gone_hash = only_gone.identity
    del only_gone
    rt.disconnect_session(gone_tab)  # the tab closed: Streamlit keeps its session for a reconnect
    assert gone_tab in {i.session.id for i in rt._session_mgr.list_sessions()}
    clock = [0.0]
    reaper = Reaper(ttl=60, clock=lambda: clock[0])
    reaper.sweep(rt)
    assert reaper.closed == 0 and gone_tab in files.file_storage  # within the TTL it may still come back
    clock[0] = 60.0
    assert reaper.sweep(rt) and reaper.closed == 1
    _run(loop, asyncio.sleep(0.05))  # the close runs on the runtime's event loop
    assert {i.session.id for i in rt._session_mgr.list_sessions()} == {open_tab}
    assert gone_tab not in files.file_storage  # its uploaded bytes are gone
    gc.collect()
    assert session() is None  # nothing keeps the closed session alive
    # the tokenizer only it held is released once idle (with its derived work); the open tab's stays
    assert gone_hash in memory.release_unheld({open_tab}, idle_s=0)
    assert shared.identity in LRU and gone_hash not in LRU and set(memory.holders()) == {open_tab}
    gc.collect()
    assert obj() is None
    LRU.discard(shared.identity)
