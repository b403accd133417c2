"""The one-home modules: paths, cache (memoize + disk store), progress, atomic outputs."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from support import ROOT, load_shared

from analysis.core import cache, paths, progress
from analysis.core.outputs import atomic_folder, atomic_write_text, strict_json
from analysis.errors import DataError


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_paths_follow_the_environment_at_call_time(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKLAB_ASSETS", str(tmp_path / "assets"))
    monkeypatch.delenv("TOKLAB_FLORES", raising=False)
    assert paths.shared_assets() == (tmp_path / "assets").resolve()
    assert paths.shared_flores() == (tmp_path / "assets" / "flores200").resolve()
    monkeypatch.setenv("TOKLAB_FLORES", str(tmp_path / "fl"))
    assert paths.flores_setting() == tmp_path / "fl"
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "c"))
    assert paths.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()
    monkeypatch.setenv("TOKLAB_CACHE_MAX_MB", "3")
    assert paths.cache_max_bytes() == 3 * 1024 * 1024
    monkeypatch.setenv("TOKLAB_CACHE_MAX_MB", "lots")
    assert paths.cache_max_bytes() == 2048 * 1024 * 1024


#: (setting, its default in bytes or characters, its unit)
SIZE_SETTINGS = [
    ("TOKLAB_MAX_FILE_MB", paths.max_file_bytes, 200 * paths.MB),
    ("TOKLAB_MAX_UNZIPPED_MB", paths.max_unzipped_bytes, 400 * paths.MB),
    ("TOKLAB_MAX_TEXT_MB", paths.max_text_bytes, 256 * paths.MB),
    ("TOKLAB_MAX_LINE_CHARS", paths.max_line_chars, 1_000_000),
    ("TOKLAB_CACHE_MAX_MB", paths.cache_max_bytes, 2048 * paths.MB),
]


@pytest.mark.parametrize("name, cap, default", SIZE_SETTINGS, ids=[s[0] for s in SIZE_SETTINGS])
def test_size_settings_stay_whole_numbers_whatever_the_operator_writes(monkeypatch, name, cap, default):
    """A size setting that is not a finite positive number is ignored (the default applies), a huge one means no
    practical limit; none of them ends in an OverflowError (inf, 1e400) or a ValueError (nan) where a cap is read,
    and none becomes 0 (a line cap of 0 characters would read nothing, forever)."""
    for bad in ("lots", "", "0", "-5", "nan", "inf", "-inf", "1e400"):
        monkeypatch.setenv(name, bad)
        assert cap() == default, bad
    monkeypatch.setenv(name, "1e300")
    assert cap() == paths.NO_LIMIT
    monkeypatch.setenv(name, "0.0000001")  # a tiny positive setting is still a cap of at least one
    assert cap() >= 1


def test_pathological_input_size_follows_the_environment_within_bounds(monkeypatch):
    """The robustness report's timed inputs: 512 KiB by default, the operator's size in KiB, at most 64 MiB."""
    monkeypatch.delenv("TOKLAB_PATHOLOGICAL_KB", raising=False)
    assert paths.pathological_bytes() == 512 * 1024
    for raw, want in (("16", 16 * 1024), ("nan", 512 * 1024), ("-1", 512 * 1024), ("1e300", 64 * paths.MB)):
        monkeypatch.setenv("TOKLAB_PATHOLOGICAL_KB", raw)
        assert paths.pathological_bytes() == want, raw


def test_memoize_keys_tokenizers_by_content_and_bounds_its_size():
    calls = []

    @cache.memoize(maxsize=2)
    def f(tok, k=1):
        calls.append(tok.name)
        return object()

    a = load_shared("gpt2")
    renamed = a.with_source(name="another name")  # same content, another object
    assert f(a) is f(renamed) and calls == ["gpt2"]
    f(a, k=2)
    f(a, k=3)  # evicts (a, k=1)
    f(a)
    assert len(calls) == 4 and f.cache_info()["size"] == 2


def test_identical_concurrent_calls_compute_once():
    started = []

    @cache.memoize(maxsize=4)
    def slow(x):
        started.append(x)
        time.sleep(0.2)
        return [x]

    out = []
    threads = [threading.Thread(target=lambda: out.append(slow(7))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert started == [7] and len(out) == 8 and all(o is out[0] for o in out)


def test_single_flight_shares_errors_and_recovers():
    flight = cache.SingleFlight()
    with pytest.raises(ValueError):
        flight.run("k", lambda: (_ for _ in ()).throw(ValueError("boom")))
    assert flight.run("k", lambda: 3) == 3


def test_disk_store_is_strict_versioned_and_capped(tmp_cache, monkeypatch):
    store = cache.DiskCache("unit", version=1)
    assert store.put("a", {"x": [1, 2]}) and store.get("a") == {"x": [1, 2]}
    assert not store.put("nan", {"x": float("nan")})  # strict JSON only
    assert cache.DiskCache("unit", version=2).get("a") is None  # another format version is a miss
    store.path("bad").write_text("{not json")
    assert store.get("bad") is None
    # the cap evicts least recently used files first
    monkeypatch.setenv("TOKLAB_CACHE_MAX_MB", str(3000 / (1024 * 1024)))
    for k in "bcd":
        store.put(k, "y" * 1000)
        time.sleep(0.01)
    kept = {p.stem for p in (cache.store_dir() / "unit").glob("*.json")}
    assert (
        "d" in kept
        and "a" not in kept
        and sum(p.stat().st_size for p in cache.store_dir().rglob("*.json")) <= 3000
    )


def test_a_read_keeps_the_stamp_and_counts_as_use(tmp_cache, monkeypatch):
    """Reading a document marks it used (the cap evicts it last) without changing its stamp, which only a write
    changes: a process that compares stamps re-reads what another process wrote, not what another one read."""
    store = cache.DiskCache("unit", version=1)
    assert store.stamp("a") is None
    store.put("a", {"n": 1})
    first = store.stamp("a")
    assert store.get("a") == {"n": 1} and store.stamp("a") == first
    store.put("a", {"n": 2})
    assert store.stamp("a") != first
    assert store.read_if_changed("a") == {"n": 2} and store.read_if_changed("a") is None  # new, then known
    cache.DiskCache("unit", version=1).put("a", {"n": 3})  # written elsewhere (another process)
    assert store.read_if_changed("a") == {"n": 3} and store.read_if_changed("a") is None
    assert store.update("a", lambda d: {"n": d["n"] + 1})
    assert store.read_if_changed("a") is None  # its own write is known
    store.put("b", "y" * 1000)
    old = time.time_ns() - 10**12  # both written long ago; "a" then read now
    for k in "ab":
        os.utime(store.path(k), ns=(old, old))
    store.get("a")
    monkeypatch.setenv("TOKLAB_CACHE_MAX_MB", str(1100 / (1024 * 1024)))
    store.put("c", "y" * 1000)  # over the cap: the least recently used goes ("b", written and never read)
    assert {p.stem for p in (cache.store_dir() / "unit").glob("*.json")} == {"a", "c"}


_ADD_KEYS = """
import sys
from analysis.core.cache import DiskCache
store = DiskCache("unit", 1)
for i in range(int(sys.argv[2])):
    store.update("doc", lambda d, i=i: {**(d or {}), f"{sys.argv[1]}-{i}": i})
"""


def test_processes_updating_one_document_keep_each_others_entries(tmp_cache):
    """Four processes add 25 entries each to one document at once: every entry is there (read-merge-write under
    the store's lock; without it a writer replaces what another added since its read)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _ADD_KEYS, f"p{n}", "25"], env=env, cwd=ROOT)
        for n in range(4)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0, 0]
    doc = cache.DiskCache("unit", 1).get("doc")
    assert sorted(doc) == sorted(f"p{n}-{i}" for n in range(4) for i in range(25))


def test_a_lock_file_that_is_not_a_regular_file_is_refused(tmp_cache):
    """The lock is opened without following a link or blocking on a FIFO: the update is skipped, nothing hangs."""
    store = cache.DiskCache("unit", version=1)
    lock = store.path("doc").with_name("doc.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(lock)
    assert store.update("doc", lambda d: {"x": 1}) is None and store.get("doc") is None
    lock.unlink()
    (tmp_cache / "elsewhere").write_text("")
    lock.symlink_to(tmp_cache / "elsewhere")
    assert store.update("doc", lambda d: {"x": 1}) is None


def test_atomic_folder_replaces_whole_or_not_at_all(tmp_path):
    out = tmp_path / "out"
    with atomic_folder(out) as d:
        (d / "a.txt").write_text("1")
    assert (out / "a.txt").read_text() == "1"
    with pytest.raises(DataError, match="not empty"):
        with atomic_folder(out):
            pass
    with pytest.raises(RuntimeError):
        with atomic_folder(out, replace=True) as d:
            (d / "b.txt").write_text("half")
            raise RuntimeError("killed")
    assert sorted(p.name for p in out.iterdir()) == ["a.txt"]  # untouched
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial folder left
    with atomic_folder(out, replace=True) as d:
        (d / "b.txt").write_text("2")
    assert sorted(p.name for p in out.iterdir()) == ["b.txt"]  # replaced whole, never merged
    f = tmp_path / "file"
    atomic_write_text(f, "x")
    with pytest.raises(DataError, match="not a folder"):
        with atomic_folder(f):
            pass


def test_strict_json_refuses_nan():
    assert json.loads(strict_json({"a": 1.5})) == {"a": 1.5}
    with pytest.raises(ValueError):
        strict_json({"a": float("nan")})


def test_progress_helpers():
    seen = []
    sub = progress.scaled(lambda d, t, m="": seen.append((d, t, m)), 0.5, 1.0)
    sub(1, 2, "half")
    assert seen == [(0.75, 1.0, "half")]
    progress.report(None, 1, 2)  # None-safe
    buf = io.StringIO()
    show = progress.stderr_progress("training", stream=buf, every=3600)
    show(1, 10, "merges")
    show(2, 10, "merges")  # throttled
    show(10, 10, "merges")  # the last always shows
    assert buf.getvalue().splitlines() == ["training: 10% merges", "training: 100% merges"]
    buf = io.StringIO()  # each named stage shows once, its counters throttled
    show = progress.stderr_progress("model-check", stream=buf, every=3600)
    for done, message in [
        (0, "loading 1 of 2"),
        (1, "loading 2 of 2"),
        (2, "est_Latn: lines read"),
        (3, "step 4"),
    ]:
        show(done, 10, message)
    assert buf.getvalue().splitlines() == ["model-check: 0% loading 1 of 2", "model-check: 20% est_Latn: lines read",
                                           "model-check: 30% step 4"]  # fmt: skip
