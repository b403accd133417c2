"""The byte-budgeted LRU of loaded objects (analysis.core.memory.BudgetCache) and what its evictions forget."""

from __future__ import annotations

import ctypes.util
import os
import platform
import subprocess
import sys
import threading
import types

import pytest
from support import ROOT, load_shared

from analysis import LoadedTokenizer
from analysis.core import cache, memory, paths
from analysis.core.memory import BudgetCache, release_memory
from analysis.tokenizer import shared


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_holds_and_the_least_recently_used_go_first():
    gone: list[tuple[str, object]] = []
    lru = BudgetCache(100, on_evict=lambda k, v: gone.append((k, v)))
    for k in "abc":
        lru.put(k, k.upper(), 30)
    assert lru.peek("a") == "A"  # a is now the most recently used: b goes first
    lru.put("d", "D", 30)
    assert lru.keys() == ["c", "a", "d"] and lru.nbytes() == 90 and gone == [("b", "B")]
    assert lru.get("c", lambda: "never", lambda v: 1) == "C"  # a hit refreshes c
    lru.put("e", "E", 50)
    assert lru.keys() == ["c", "e"] and lru.nbytes() <= 100 and [k for k, _ in gone] == ["b", "a", "d"]
    # one object larger than the whole budget is kept alone (its users would load it again on every request)
    assert lru.get("huge", lambda: "H", lambda v: 500) == "H" and lru.keys() == ["huge"]
    lru.put("f", "F", 10)
    assert lru.keys() == ["f"] and lru.nbytes() <= 100


def test_pinned_objects_stay_and_a_callable_budget_is_read_on_every_add():
    budget = [100]
    lru = BudgetCache(lambda: budget[0])
    lru.pin("default")
    lru.put("default", "D", 60)
    lru.put("x", "X", 30)
    budget[0] = 70
    lru.put("y", "Y", 10)  # over the new budget: x goes, the pinned default stays
    assert lru.keys() == ["default", "y"]
    assert lru.release(held=set()) == ["y"] and lru.keys() == ["default"]
    lru.unpin("default")
    assert lru.release(held=set()) == ["default"] and len(lru) == 0


def test_loads_run_once_for_concurrent_callers_and_again_after_eviction():
    lru = BudgetCache(100)
    calls: list[int] = []
    gate = threading.Event()

    def load() -> str:
        calls.append(1)
        gate.wait(5)
        return "obj"

    out: list[str] = []
    threads = [
        threading.Thread(target=lambda: out.append(lru.get("k", load, lambda v: 10))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert out == ["obj"] * 4 and len(calls) == 1 and lru.loads == 1
    lru.discard("k")
    assert lru.get("k", load, lambda v: 10) == "obj" and len(calls) == 2  # reloaded on demand


def test_release_drops_only_what_no_holder_names_and_nobody_used_lately():
    clock = Clock()
    lru = BudgetCache(1000, clock=clock)
    for k in ("a", "b", "c"):
        lru.put(k, k, 10)
    clock.now = 100.0
    lru.peek("c")  # used just now
    assert lru.release(held={"a"}, idle_s=30) == ["b"]
    assert lru.keys() == ["a", "c"]
    clock.now = 200.0
    assert lru.release(held={"a"}, idle_s=30) == ["c"]


def test_the_memory_budget_follows_the_environment(monkeypatch):
    monkeypatch.delenv("TOKLAB_MEMORY_MB", raising=False)
    assert paths.memory_budget_bytes() == 2048 * paths.MB
    monkeypatch.setenv("TOKLAB_MEMORY_MB", "64")
    assert paths.memory_budget_bytes() == 64 * paths.MB
    monkeypatch.setenv("TOKLAB_MEMORY_MB", "-3")
    assert paths.memory_budget_bytes() == 2048 * paths.MB


def test_an_evicted_tokenizer_takes_its_derived_work_with_it():
    """What on_evict calls: memoised results and the shared Rust tokenizer of those bytes are forgotten; views
    under another name share what was already read from the bytes."""
    tok = load_shared("gpt2")
    other = load_shared("bert-base-uncased")
    _ = tok.tokenizer, tok.vocab
    named = tok.with_source(name="mine")
    assert named.name == "mine" and named.vocab is tok.vocab and named.content_hash == tok.content_hash

    @cache.memoize(maxsize=8)
    def size_of(t, k: int) -> int:
        return t.vocab_size + k

    size_of(tok, 1), size_of(tok, 2), size_of(other, 1)
    assert size_of.cache_info()["size"] == 3
    assert cache.forget_content(tok.content_hash) >= 2
    assert size_of.cache_info()["size"] == 1  # the other tokenizer's result stays
    # the same bytes with another chat template: its own result (a result may read the settings), and forgetting
    # the bytes forgets both
    templated = LoadedTokenizer(
        tok.to_json().encode("utf-8"), "templated", config={"chat_template": "{{ 1 }}"}
    )

    @cache.memoize(maxsize=8)
    def template_of(t) -> str:
        return str(t.config.get("chat_template"))

    assert (template_of(tok), template_of(templated)) == ("None", "{{ 1 }}")
    assert cache.forget_content(tok.content_hash) >= 2 and template_of.cache_info()["size"] == 0
    assert shared.SHARED.forget(tok.digest) and not shared.SHARED.forget(tok.digest)
    release_memory()  # a full collection and malloc_trim where there is one: never raises


def test_malloc_arenas_are_capped_unless_the_operator_chose(monkeypatch):
    """The server caps glibc's arenas (and passes the cap to the processes it starts) — not over an operator's
    MALLOC_ARENA_MAX."""
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert memory.limit_malloc_arenas() is False
    assert os.environ["MALLOC_ARENA_MAX"] == "4"
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    if ctypes.util.find_library("c") is None or platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert memory.limit_malloc_arenas(memory.SERVER_ARENAS) is True
    assert os.environ["MALLOC_ARENA_MAX"] == str(memory.SERVER_ARENAS)


def test_release_memory_gives_arrows_pool_back_where_pyarrow_is_loaded(monkeypatch):
    """Streamlit serializes every table through Arrow, whose pool (mimalloc) keeps what it freed: a closed tab's
    tables stayed in the server's RSS until `release_memory` asked the pool to give its unused pages back."""
    calls: list[str] = []
    pool = types.SimpleNamespace(release_unused=lambda: calls.append("released"))
    monkeypatch.setitem(sys.modules, "pyarrow", types.SimpleNamespace(default_memory_pool=lambda: pool))
    release_memory()
    assert calls == ["released"]
    monkeypatch.setitem(sys.modules, "pyarrow", types.SimpleNamespace())  # an old pyarrow: nothing to call
    release_memory()


def test_the_mmap_threshold_is_fixed_unless_the_operator_chose(monkeypatch):
    """The server fixes glibc's mmap threshold (big buffers mapped on their own, given back when freed) — not over an
    operator's MALLOC_MMAP_THRESHOLD_."""
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert memory.fix_mmap_threshold() is False
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    glibc = platform.libc_ver()[0] == "glibc"
    # in a process of its own: the fixed threshold would stay with this test process (and slow its big tensors)
    code = "import os; from analysis.core import memory; print(memory.fix_mmap_threshold(), 'MALLOC_MMAP_THRESHOLD_' in os.environ)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == [str(glibc), "False"], (
        done.stderr
    )  # the workers keep glibc's adaptive default
