"""Walk every page of the app as a hostile browser user: type a server path into every free-text field, tick every
checkbox and press every button (each once, the page re-run after each), with server paths off and with them on
(other roots allowed). The path typed names a folder holding `keep.txt`, outside every allowed root: no field may
reach it — no open, listing, creation, rename or deletion under it (watched with an audit hook), and afterwards the
folder holds exactly what it held.

Only `ui.pickers.server_path_input` may turn typed text into a server path, and it refuses anything outside the
roots; a page with its own path field (the Token reuse page's "Write to folder" did this, and wiped the folder)
fails here.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from download_support import record_downloads
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared, open_expanders

from analysis.core import paths
from analysis.tokenizer.export import library_zip
from ui.library import _SELECT_NEXT, _escape

# the events of the interpreter that touch a path (os.stat and friends have none: they only look)
_EVENTS = {"open", "os.listdir", "os.scandir", "os.mkdir", "os.remove", "os.rmdir", "os.rename", "os.replace",
           "os.chmod", "os.truncate", "os.symlink", "os.link", "os.utime", "shutil.rmtree", "shutil.copyfile",
           "shutil.copytree", "shutil.move", "shutil.make_archive"}  # fmt: skip
_WATCH: list[str] = []
_SEEN: list[str] = []

# buttons not pressed: those that fetch from the internet (offline here), the library's "remove" buttons (they
# reach no server path, and would empty the library before its zip is checked) and the example gallery's build (it
# reads only the operator's example folders and FLORES, and would compute every example on 204 languages in a
# background thread for minutes, starving the walk and every test after it)
_NOT_PRESSED = re.compile(r"fetch|dl-official|dl-plus|^rm-|^gal-build$")
# rounds of "fill, tick, press the next button" per page before giving up (a page has far fewer buttons)
MAX_ROUNDS = 40


def _audit(event: str, args: tuple) -> None:
    if not _WATCH or event not in _EVENTS:
        return
    for a in args[:2]:  # the path (and the destination of a rename)
        if isinstance(a, (str, bytes, os.PathLike)):
            p = os.fsdecode(a)
            if any(p.startswith(w) for w in _WATCH):
                _SEEN.append(f"{event} {p}")


sys.addaudithook(_audit)


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under `folder` (itself included) → its bytes (None for a folder)."""
    got: dict[str, bytes | None] = {str(folder): None} if folder.is_dir() else {}
    for p in sorted(folder.rglob("*")):
        got[str(p)] = p.read_bytes() if p.is_file() else None
    return got


def _pages() -> list[str]:
    src = (ROOT / "app.py").read_text(encoding="utf-8")
    return re.findall(r'_page\("(pages/\w+\.py)"', src)


def _page_params() -> list:
    """One case per page and mode, each scheduled on its own (the two workers share a page's walks). Grouping a
    page's walks on one worker was meant to compute its jobs once, but the run's disk cache already shares them, and
    measured it cost time: the walks took 3.7 and 4.1 worker-minutes grouped (cold runs T and U, 2026-11-27) against
    2.4 spread (run S), because a walk then no longer finds in memory what another worker's tests loaded.
    Modes: server paths ``off`` and ``on``, and ``untyped`` for the pages of :data:`UNTYPED`. Every page's ``off``
    walk comes first, then every ``on`` walk: a page's two walks then no longer start at the same moment on the two
    workers, so the second finds the first one's results in the run's disk cache (Token reuse's collateral table:
    a 23 s walk became 6 s).
    The ``on`` walk is for pages that draw a server-path field (their own, or one of a shared widget they use:
    :func:`_draws_a_path_field`) and for Home, whose walk covers the frame and the sidebar every page shares: on a
    page without one, server paths on change nothing its fields can reach, and its ``off`` walk already presses
    everything."""
    return [
        pytest.param(page, mode, id=f"{page}-{mode}")
        for mode in ("off", "on", "untyped")
        for page in _pages()
        if (mode != "untyped" or page in UNTYPED)
        and (mode != "on" or page == "pages/home.py" or _draws_a_path_field(page))
    ]


#: The widgets that turn typed text into a server path (ui.pickers): a page that reaches one gets the ``on`` walk.
_PATH_FIELDS = re.compile(r"\b(server_path_input|pick_model)\(")
_UI_IMPORT = re.compile(r"^(?:from ui(?:\.(\w+))? import ([\w, ()\n]+)|import ui\.(\w+))", re.M)


def _draws_a_path_field(page: str) -> bool:
    """Whether `page`, or a `ui` module it imports (transitively), calls a server-path widget."""
    todo, seen = [ROOT / page], set()
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        src = path.read_text(encoding="utf-8")
        if _PATH_FIELDS.search(src) and "def server_path_input" not in src:
            return True
        for mod, names, plain in _UI_IMPORT.findall(src):
            if mod or plain:
                todo.append(ROOT / "ui" / f"{mod or plain}.py")
            else:  # from ui import a, b
                todo.extend(
                    ROOT / "ui" / f"{n.strip()}.py" for n in re.split(r"[,()\s]+", names) if n.strip()
                )
    return False


def _walk(
    at: AppTest, page: str, sentinel: str | None, check: Callable[[AppTest, str], None] | None = None
) -> list[str]:
    """Fill (with `sentinel`, unless None), tick and press everything on `page`; returns the keys of the buttons
    pressed. `check(at, step)` runs after every run of the page."""
    at.switch_page(page).run()
    if check:
        check(at, "opened")
    pressed: list[str] = []
    for _ in range(MAX_ROUNDS):
        changed = _small_work(at, page)
        for w in [*at.text_input, *at.text_area] if sentinel is not None else []:
            if not w.disabled and w.value != sentinel:
                w.input(sentinel)
                changed = True
        for c in at.checkbox:
            if not c.disabled and not c.value:
                c.check()
                changed = True
        if changed:
            at.run()
            if check:
                check(at, "filled")
        todo = [
            b
            for b in at.button
            if b.key and not b.disabled and b.key not in pressed and not _NOT_PRESSED.search(b.key)
        ]
        if not todo:
            if not changed:
                break
            continue
        pressed.append(todo[0].key)
        todo[0].click().run()
        if check:
            check(at, f"pressed {pressed[-1]}")
        assert not at.exception, (page, pressed[-1], [e.message for e in at.exception])
    return pressed


#: Settings made during a page's walk (as soon as their widget is shown) so that its buttons start small jobs: the walk is about where typed text can
#: reach, not about scale, and a job of minutes (Compression's parity-aware training on all 204 languages at 8,000
#: merges: 90 s on two idle cores, over 300 s on loaded ones) only makes the walk depend on a quiet machine. The
#: buttons, their downloads and every text field are walked as before.
SMALL_WORK: dict[str, dict[str, object]] = {
    "pages/compression.py": {"cmp-par-scope": "chosen", "cmp-par-vocab": 500},
    "pages/sabpe.py": {"sa-langs": ["python", "go"], "sa-files": 1, "sa-vocab": 500},
    "pages/undertrained.py": {"ut-k": 2},
    "pages/transplant.py": {"tp-init": "random", "tp-check-langs": ["est_Latn"], "tp-check-lines": 2},
}
# the Export check section of every exporting page: one language, a few lines (the check itself is measured in
# tests/evaluate/test_export_check.py; here only where its fields and downloads reach matters)
for _page, _key in {"pages/extend.py": "ext-check", "pages/prune.py": "prune-check", "pages/sabpe.py": "sa-check",
                    "pages/inspect.py": "inspect-check", "pages/reuse.py": "reuse-check"}.items():  # fmt: skip
    SMALL_WORK.setdefault(_page, {}).update({f"{_key}-langs": ["est_Latn"], f"{_key}-lines": 5})


def _small_work(at: AppTest, page: str) -> bool:
    """Open the page's closed expanders that draw their content when opened, and set the page's :data:`SMALL_WORK`
    widgets that are shown and not yet set (a widget may appear only after a button); True when one changed (the
    page must run again)."""
    changed = open_expanders(at)
    want = SMALL_WORK.get(page, {})
    for kind in ("radio", "number_input", "selectbox", "multiselect"):
        for w in getattr(at, kind):
            if w.key in want and not w.disabled and w.value != want[w.key]:
                w.set_value(want[w.key])
                changed = True
    return changed


#: What the walk of a page must reach (the buttons behind which its writes and downloads live): a walk that stops
#: early would check nothing there.
MUST_PRESS = {"pages/reuse.py": {"reuse-train"}}
MUST_DOWNLOAD = {"pages/reuse.py": {"reuse-download"}, "pages/extend.py": {"ext-download", "ext-report"},
                 "pages/home.py": {"lib-dl"},
                 "pages/undertrained.py": {"ut-dl-report", "ut-dl-cand-csv", "ut-dl-health-csv"}}  # fmt: skip


# ------------------------------------------------------------------ no server path in a download or a view
#: Pages whose downloads appear only when their fields keep their defaults (a typed path in Under-trained
#: tokens' model field means no model, so no pipeline and none of its downloads): they get a third walk, with server
#: paths off and nothing typed, where the downloads are checked.
UNTYPED = {"pages/undertrained.py"}
#: The end of a path as shown: a quote, a space, a control character or markup.
_PATH_END = re.compile(rb"[\s\x00-\x1f'\"<>`|)\]]")


def _echoes(data: bytes, place: bytes, typed: bytes | None) -> list[int]:
    """Where `place` opens a path in `data` that is not the user's own typed text shown back (whole, or cut short
    as the decode box's "item 1 ('/tmp/pytest-of-…/')" does): the path from there to its end is a leak unless it is
    a prefix of what was typed. Positions are in `data` with the whole echoes dropped."""
    if (
        typed
    ):  # whole echoes (a widget's value is followed by protobuf bytes, not an end), also as the sidebar
        # writes a library name in Markdown (a tokenizer renamed to the typed text)
        for form in (typed, _escape(typed.decode("utf-8", "replace")).encode()):
            data = data.replace(form, b"")
    got, i = [], data.find(place)
    while i >= 0:
        m = _PATH_END.search(data, i)
        path = data[i : m.start() if m else len(data)]
        if typed is None or not typed.startswith(path):
            got.append(i)
        i = data.find(place, i + 1)
    return got


def _server_places() -> list[str]:
    """Absolute server paths a browser user must not see: the repository, the shared assets, the caches, the
    home and temporary folders."""
    places = {str(ROOT), str(ROOT.parent), str(paths.shared_assets()), str(paths.models_dir()),
              str(paths.cache_dir()), str(Path.home()), tempfile.gettempdir(), os.environ.get("TMPDIR", "")}  # fmt: skip
    return sorted(p.rstrip("/") + "/" for p in places if p and p != "/")


def _texts_of(data: bytes) -> list[tuple[str, bytes]]:
    """(name, bytes) of a download, and of every member when it is a zip (deflated text would hide a path)."""
    got = [("", data)]
    if zipfile.is_zipfile(io.BytesIO(data)):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            got += [(i.filename, z.read(i)) for i in z.infolist() if i.file_size <= 50_000_000]
    return got


def _leaks(data: bytes, places: list[str], typed: bytes | None = None) -> list[str]:
    return [
        f"{name or '(file)'}: {p}"
        for name, b in _texts_of(data)
        for p in places
        if _echoes(b, p.encode(), typed)
    ]


def _view_bytes(at: AppTest) -> bytes:
    """Everything the page sends to the browser: every element's protobuf as it goes over the wire (text, help,
    values, tables as Arrow bytes; strings are UTF-8 in both, so a path is found wherever it is). The wire form, not
    the text form: the text form of Load & inspect's vocabulary table is 24 MB and took 2 s per step."""
    out: list[bytes] = []

    def visit(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(proto.SerializeToString())
        for child in getattr(node, "children", {}).values():
            visit(child)

    visit(at._tree)
    return b"\n".join(out)


@pytest.mark.slow
@pytest.mark.parametrize(("page_file", "mode"), _page_params())
def test_a_hostile_walk_reaches_and_shows_no_server_path(page_file, mode, tmp_path, monkeypatch):
    """One walk of a page (a fresh session each, so the two test workers share the pages between them), with an
    example tokenizer in the library (its source is a folder of the shared assets) and chosen in the page's picker,
    checking after every run:

    - no field reaches the typed folder outside the roots (no open, listing, creation, rename or deletion under
      it, and afterwards it holds exactly what it held);
    - with server paths off (the default): no download (nor any member of a zip) and nothing shown names a file
      by its absolute server path. The typed folder is the user's own text, so it may be shown back."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    sentinel = tmp_path / "outside" / "keep"
    sentinel.mkdir(parents=True)
    (sentinel / "keep.txt").write_text("keep me\n", encoding="utf-8")
    if mode == "on":
        monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
        monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(allowed))
    else:
        monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    typed = None if mode == "untyped" else str(sentinel)
    # downloads are read (and checked) with server paths off; with them on, a page's downloads are the same and
    # only where its fields reach is watched, so they stay lazy as in the app (Prune's zip of every run: 7 s a walk)
    got = record_downloads(monkeypatch) if mode != "on" else {}
    places = _server_places()
    before = _snapshot(tmp_path / "outside")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.session_state["toklab_library"] = {**at.session_state["toklab_library"], "gpt2": load_shared("gpt2")}
    # the page's tokenizer picker starts on it: its source is the server path a download could leak, and its
    # 50k vocabulary keeps every job small (on the embedded default's 151k, Prune's and Extend's walks took 15-23 s
    # each, mostly zipping and re-reading its exports); the slow parts that wait for a button on a large vocabulary
    # (ui.progress.start_now) run at once here, and test_first_views checks that waiting
    at.session_state[_SELECT_NEXT] = "gpt2"
    leaks: list[str] = []
    scanned: dict[str, bytes] = {}
    echo = typed.encode() if typed else None

    def check(at: AppTest, step: str) -> None:
        shown = _view_bytes(at).replace(echo, b"") if echo else _view_bytes(at)
        for p in places:
            for i in _echoes(shown, p.encode(), echo)[:1]:
                around = shown[max(0, i - 80) : i + 80].decode("utf-8", "replace")
                leaks.append(f"{page_file} {step}: shown …{around}…")
        for key, data in got.items():
            if scanned.get(key) != data:
                scanned[key] = data
                leaks.extend(f"{page_file} {step}: download {key}: {x}" for x in _leaks(data, places, echo))

    _WATCH[:] = [str(sentinel)]
    _SEEN.clear()
    try:
        pressed = _walk(at, page_file, typed, check if mode != "on" else None)
        assert not _SEEN, (page_file, pressed, _SEEN[:5])
    finally:
        _WATCH.clear()
    assert _snapshot(tmp_path / "outside") == before
    # the walk went deep: e.g. the R-BPE page trained, which is where its model export lives
    assert MUST_PRESS.get(page_file, set()) <= set(pressed), pressed
    assert not leaks, "\n".join(dict.fromkeys(leaks))
    if mode == "untyped" or (mode == "off" and page_file not in UNTYPED):
        assert MUST_DOWNLOAD.get(page_file, set()) <= set(got), sorted(got)


def test_only_the_users_own_typed_path_may_be_shown_back():
    typed = b"/tmp/pytest-of-root/p-1/outside/keep"
    assert _echoes(b"item 1 ('/tmp/pytest-of-root/') is not", b"/tmp/", typed) == []
    # a whole echo is dropped (positions are after that), the other path is kept
    assert _echoes(b"R" + typed + b"R/tmp/x", b"/tmp/", typed) == [2]
    assert _echoes(b"wrote /tmp/pytest-of-root/p-1/cache.json", b"/tmp/", typed) == [6]
    assert _echoes(b"'/tmp/pytest-of-root/'", b"/tmp/", None) == [1]


def test_the_library_zip_names_an_example_tokenizer_by_name():
    """The session-library zip held an example tokenizer's absolute folder as its source."""
    data = library_zip(
        {"gpt2": load_shared("gpt2"), "up": load_shared("gpt2").with_source(source="upload:x.json")}
    )
    assert not _leaks(data, _server_places())
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        entries = json.loads(z.read("library.json"))["entries"]
    assert [e["source"] for e in entries] == ["gpt2", "upload:x.json"]


def test_public_names_never_hold_a_server_path(tmp_path):
    assets = paths.shared_assets()
    assert paths.public_name(assets / "corpora" / "text" / "et.txt") == "text/et.txt"
    assert paths.public_name(tmp_path / "deep" / "corpus.txt") == "corpus.txt"
    assert paths.public_source(str(tmp_path / "tok")) == "tok"
    assert paths.public_source("hub:openai-community/gpt2") == "hub:openai-community/gpt2"


def test_error_messages_on_a_page_shorten_server_paths(monkeypatch, tmp_path):
    """A hub id missing from the local cache said "not in the local Hugging Face cache (/root/.cache/huggingface/hub)":
    the page shortens every server path in a message to its public name (the CLI keeps it whole)."""
    text = f"not in the local Hugging Face cache ({Path.home()}/.cache/huggingface/hub); see ~/.cache/x/y."
    assert paths.public_text(text) == "not in the local Hugging Face cache (…/hub); see …/y."
    kept = "https://huggingface.co/openai-community/gpt2 at 3/4 bytes/token"
    assert paths.public_text(kept) == kept
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/inspect.py").run()
    at.text_input(key="inspect-hub").set_value("nobody-here/no-such-tokenizer").run()
    at.button(key="inspect-load-hub").click().run()
    shown = [e.value for e in at.error]
    assert any("not in the local Hugging Face cache (…/hub-cache)" in e for e in shown), shown
    assert not any(str(tmp_path) in e for e in shown)


def test_the_pages_with_a_server_path_field_are_found():
    """The ``on`` walks follow :func:`_draws_a_path_field`: a page's own field, and one reached through `ui`."""
    assert _draws_a_path_field("pages/compression.py")  # its own corpus folder field (ui.corpus_jobs)
    assert _draws_a_path_field("pages/transplant.py")  # the model picker (ui.pickers.pick_model)
    assert not _draws_a_path_field("pages/playground.py") and not _draws_a_path_field("pages/drift.py")
