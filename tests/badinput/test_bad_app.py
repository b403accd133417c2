"""Bad inputs through the app (AppTest, pages inside the app.py frame): every one gives an error box and never an
exception; the browser reaches no server file by default, and when the operator allows paths, none outside the
configured roots (watched with an audit hook on `open`/`os.listdir`/`os.scandir`); exports go to a new folder;
HTML in file names is shown as text; a session's library can be saved and restored."""

from __future__ import annotations

import io
import json
import os
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from bad_files import (
    bad_crc,
    deep_json,
    duplicate_ids_doc,
    embeddings_file,
    empty_vocab_doc,
    encrypted,
    panic_merge_doc,
    sparse_ids_doc,
    tokenizer_doc,
    understated,
    write_folder,
    zip_of,
)
from bad_run import strict_loads
from download_support import record_downloads
from streamlit.testing.v1 import AppTest
from support import ROOT, TOKENIZERS, load_shared

from analysis import TokenizerLoadError
from analysis.core.workspace import default_store
from analysis.methods.pruning.report import zip_folder
from analysis.tokenizer.export import library_zip
from analysis.tokenizer.sources import load_library_zip
from ui.memory import resolve

GPT2_JSON = (TOKENIZERS / "gpt2" / "tokenizer.json").read_bytes()

# ------------------------------------------------------------------------------------------ file-access watch
_WATCH: list[str] = []
_SEEN: list[str] = []


def _audit(event: str, args: tuple) -> None:
    if not _WATCH or event not in ("open", "os.listdir", "os.scandir"):
        return
    path = args[0] if args else None
    if isinstance(path, (str, bytes, os.PathLike)):
        p = os.fsdecode(path)
        if any(p.startswith(w) for w in _WATCH):
            _SEEN.append(f"{event} {p}")


sys.addaudithook(_audit)


@pytest.fixture
def watch():
    """Record every open/listdir/scandir of a path under the folders passed to the returned function."""

    def start(*folders: Path) -> list[str]:
        _WATCH[:] = [str(f) for f in folders] + [str(f.resolve()) for f in folders]
        _SEEN.clear()
        return _SEEN

    yield start
    _WATCH.clear()


# ------------------------------------------------------------------------------------------ helpers
def _app(page: str | None = "pages/inspect.py", library: dict | None = None, **state) -> AppTest:
    """The app on `page` (Load & inspect unless said otherwise; Home is the default page)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    if library is not None:
        at.session_state["toklab_library"] = library
    for k, v in state.items():
        at.session_state[k.replace("_", "-")] = v
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _errors(at: AppTest) -> str:
    return " | ".join(e.value for e in at.error)


def _allow(monkeypatch, root: Path) -> None:
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(root))


@pytest.fixture
def places(tmp_path):
    """(allowed root, an outside folder holding a planted tokenizer and a planted text file)."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    write_folder(allowed / "tok", tokenizer_doc())
    write_folder(outside / "planted", tokenizer_doc())
    (outside / "secret.txt").write_text("SECRET planted on the server\n", encoding="utf-8")
    return allowed, outside


# ====================================================================== the browser never reaches the server's files
def test_server_path_fields_are_off_by_default(monkeypatch):
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    at = _app()
    keys = {w.key for w in at.text_input}
    assert "inspect-path" not in keys
    assert any("Server-side paths are off" in c.value for c in at.caption)
    at.switch_page("pages/extend.py").run()
    assert not at.exception and "ext-folder" not in {w.key for w in at.text_input}
    at.switch_page("pages/compression.py").run()
    assert not at.exception
    shown = {w.key: w for w in at.text_input}
    assert "cmp-flores" not in shown and "cmp-flores-shown" not in shown
    assert any(c.value.startswith("FLORES in use: `flores200") for c in at.caption)  # by name only
    at.switch_page("pages/undertrained.py").run()
    assert not at.exception
    assert not any("path" in o.lower() for o in at.selectbox(key="ut-model-kind").options)


def test_prune_page_offers_no_folder_to_write_by_default(monkeypatch):
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    at = _app("pages/prune.py", {"gpt2": load_shared("gpt2")}, prune_order="last-n")
    assert "prune-out" not in {w.key for w in at.text_input}
    assert at.get("download_button"), "the zip download stays available"


def test_a_hub_id_is_never_read_as_a_local_path(monkeypatch, tmp_path, watch):
    monkeypatch.delenv("TOKLAB_SERVER_PATHS", raising=False)
    local = tmp_path / "owner" / "model"  # exists relative to the server's working folder
    local.mkdir(parents=True)
    (local / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    seen = watch(tmp_path / "owner")
    at = _app("pages/undertrained.py")
    at.selectbox(key="ut-model-kind").select("Hugging Face hub id").run()
    at.text_input(key="ut-model-hub").input("owner/model").run()
    at.button(key="ut-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert "cache" in _errors(at) or "hub" in _errors(at)
    assert not seen, seen


@pytest.mark.parametrize("case", ["outside", "dotdot", "link-out"])
def test_inspect_path_outside_the_roots(monkeypatch, places, watch, case):
    allowed, outside = places
    _allow(monkeypatch, allowed)
    if case == "link-out":
        (allowed / "innocent").symlink_to(outside / "planted")
    raw = {"outside": outside / "planted", "dotdot": f"{allowed}/../outside/planted",
           "link-out": allowed / "innocent"}[case]  # fmt: skip
    seen = watch(outside)
    at = _app()
    at.text_input(key="inspect-path").input(str(raw)).run()
    assert not at.exception
    assert "outside the allowed folders" in _errors(at) or "'..'" in _errors(at)
    assert "inspect-load-path" not in {b.key for b in at.button}
    assert list(at.session_state["toklab_library"]) == ["Qwen (embedded)"]
    assert not seen, seen


def test_inspect_path_inside_the_roots_loads(monkeypatch, places):
    allowed, _ = places
    _allow(monkeypatch, allowed)
    at = _app()
    at.text_input(key="inspect-path").input(str(allowed / "tok")).run()
    at.button(key="inspect-load-path").click().run()
    assert not at.exception and not at.error, _errors(at)
    assert "tok" in at.session_state["toklab_library"]


def test_extend_folder_outside_the_roots_is_not_read(monkeypatch, places, watch):
    allowed, outside = places
    _allow(monkeypatch, allowed)
    seen = watch(outside)
    at = _app("pages/extend.py")
    at.text_input(key="ext-folder").input(str(outside)).run()
    assert not at.exception
    assert "outside the allowed folders" in _errors(at)
    assert not seen, seen


def test_prune_writes_only_a_new_folder_and_zips_only_what_it_wrote(monkeypatch, places):
    allowed, _ = places
    _allow(monkeypatch, allowed)
    (allowed / "existing").mkdir()
    (allowed / "existing" / ".env").write_text("SECRET=1")
    at = _app(
        "pages/prune.py", {"gpt2": load_shared("gpt2")}, prune_order="last-n", prune_n=10, prune_langs=[]
    )
    at.text_input(key="prune-out").input(str(allowed / "existing")).run()
    assert not at.exception
    assert "already exists" in _errors(at) and "prune-write" not in {b.key for b in at.button}
    at.text_input(key="prune-out").input(str(allowed / "fresh")).run()
    at.button(key="prune-write").click().run()
    assert not at.exception, [e.message for e in at.exception]
    written = at.session_state["prune-written"]
    assert sorted(written.files) == sorted(p.name for p in (allowed / "fresh").iterdir())
    (allowed / "fresh" / ".env").write_text("SECRET=1")  # planted after the export

    with zipfile.ZipFile(io.BytesIO(zip_folder(written.folder, written.files))) as zf:
        assert not any(n.endswith(".env") for n in zf.namelist())
    assert any("Wrote 4 files" in s.value for s in at.success)


# ====================================================================== uploads: an error box, never an exception
BAD_UPLOADS = {
    "sparse ids": ("tokenizer.json", json.dumps(sparse_ids_doc()).encode(), "not dense"),
    "duplicate ids": ("tokenizer.json", json.dumps(duplicate_ids_doc()).encode(), "duplicate vocabulary ids"),
    "merge not in vocab": ("tokenizer.json", json.dumps(panic_merge_doc()).encode(), "not in the vocabulary"),
    "empty vocabulary": ("tokenizer.json", json.dumps(empty_vocab_doc()).encode(), "vocabulary is empty"),
    "deep JSON": ("tokenizer.json", deep_json(), "nested too deeply"),
    "bad CRC zip": ("tok.zip", bad_crc(zip_of({"t/tokenizer.json": GPT2_JSON})), "corrupt"),
    "encrypted zip": ("tok.zip", encrypted(zip_of({"t/tokenizer.json": GPT2_JSON})), "encrypted"),
    "lying zip": ("tok.zip", understated(zip_of({"t/tokenizer.json": GPT2_JSON})), "corrupt"),
    "non-UTF-8 vocab.txt": ("vocab.txt", b"[PAD]\n[UNK]\n\xe9t\xe9\n", "not UTF-8"),
    "empty vocab.txt": ("vocab.txt", b"\n\n", "empty"),
}


@pytest.mark.slow
def test_bad_uploads_give_error_boxes(monkeypatch):
    at = _app()
    for label, (name, data, words) in BAD_UPLOADS.items():
        at.file_uploader(key="inspect-upload").set_value((name, data, "application/octet-stream")).run()
        at.button(key="inspect-add-upload").click().run()
        assert not at.exception, (label, [e.message for e in at.exception])
        assert words.lower() in _errors(at).lower(), (label, _errors(at))
        assert list(at.session_state["toklab_library"]) == ["Qwen (embedded)"], label
    monkeypatch.setenv("TOKLAB_MAX_FILE_MB", "1")  # one cap for every way a file arrives
    at.run()  # the uploader is drawn again with the new cap (a browser refuses a larger file itself)
    assert at.file_uploader(key="inspect-upload").proto.max_upload_size_mb == 1
    at.file_uploader(key="inspect-upload").set_value(("tokenizer.json", GPT2_JSON, "application/json")).run()
    at.button(key="inspect-add-upload").click().run()
    assert not at.exception and "over the 1 MB limit" in _errors(at)


def test_html_in_an_uploaded_file_name_is_shown_as_text():
    at = _app()
    name = '<img src=x onerror="alert(1)">.json'
    at.file_uploader(key="inspect-upload").set_value(
        (name, json.dumps(tokenizer_doc()).encode(), "text/json")
    )
    at.run()
    at.button(key="inspect-add-upload").click().run()
    assert not at.exception and not at.error, _errors(at)
    shown = " ".join(m.value for m in at.sidebar.markdown)
    assert "&lt;img" in shown and "<img" not in shown


@pytest.mark.parametrize(
    "page_file,uploader", [("pages/prune.py", "prune-upload"), ("pages/extend.py", "ext-uploads")]
)
def test_latin1_training_text_upload(page_file, uploader):
    at = _app(page_file, {"gpt2": load_shared("gpt2")}, prune_order="last-n")
    latin1 = ("Tere, õun ja äädikas\n" * 50).encode("latin-1")
    at.file_uploader(key=uploader).set_value([("latin1.txt", latin1, "text/plain")]).run()
    if page_file == "pages/extend.py":
        at.checkbox(key="ext-use-flores").uncheck().run()
        at.multiselect(key="ext-corpora").set_value([]).run()
        at.button(key="ext-train").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert "not UTF-8" in _errors(at)


# ====================================================================== a library in a workspace and in a zip
def test_library_save_and_restore(tmp_path):
    at = _app()
    at.file_uploader(key="inspect-upload").set_value(
        ("mine.json", json.dumps(tokenizer_doc()).encode(), "text/json")
    )
    at.run()
    at.button(key="inspect-add-upload").click().run()
    assert "mine" in at.session_state["toklab_library"]
    assert any("kept in this tab's workspace" in c.value for c in at.sidebar.caption)
    # the workspace keeps the upload's own bytes (stored once by content hash)
    ws = at.session_state["toklab-ws"]
    [item] = default_store().items(ws, "library")
    assert (item.name, item.meta["how"]) == ("mine", "upload")
    assert default_store().read(ws, "library", "mine") == json.dumps(tokenizer_doc()).encode()
    assert "lib-save" not in [b.key for b in at.button]  # drawn when the box is opened, as a user opens it
    at.session_state["lib-box"] = True
    at.run()
    at.button(key="lib-save").click().run()
    saved = at.session_state["lib-zip"]
    assert [n for n, _ in load_library_zip(saved)] == ["mine"]
    # a new browser tab (the reload): restore from the zip
    fresh = _app(lib_box=True)
    fresh.file_uploader(key="lib-restore").set_value(("tokenizer-lab-library.zip", saved, "application/zip"))
    fresh.run()
    fresh.button(key="lib-restore-go").click().run()
    assert not fresh.exception, [e.message for e in fresh.exception]
    lib = fresh.session_state["toklab_library"]
    assert lib["mine"].identity == at.session_state["toklab_library"]["mine"].identity
    # the sidebar list shows what was restored in the same click (it is drawn after the page: a rerun)
    assert any("mine" in m.value for m in fresh.sidebar.markdown)
    assert any("Restored 1 tokenizer" in m.value for m in fresh.sidebar.success)


def test_uploads_are_named_from_the_upload_and_can_be_renamed():
    """Every uploaded tokenizer.json was named "tokenizer", with no way to rename it: a generic file name gets the
    model type and size, the name field names an upload, and Load & inspect renames an entry (its pickers
    follow)."""
    at = _app()
    data = json.dumps(tokenizer_doc()).encode()
    at.file_uploader(key="inspect-upload").set_value(("tokenizer.json", data, "text/json"))
    at.run()
    at.button(key="inspect-add-upload").click().run()
    lib = at.session_state["toklab_library"]
    n = resolve(lib[list(lib)[-1]]).vocab_size  # the library holds references
    assert list(lib)[-1] == f"tokenizer (BPE, {n:,} tokens)"
    at.text_input(key="inspect-upload-name").set_value("ours")
    at.button(key="inspect-add-upload").click().run()
    assert (
        list(at.session_state["toklab_library"])[-1] == "ours"
        and at.selectbox(key="inspect-pick").value == "ours"
    )
    at.text_input(key="inspect-new-name-ours").set_value("ours, renamed")
    at.button(key="inspect-rename").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert list(at.session_state["toklab_library"])[-1] == "ours, renamed"
    assert at.selectbox(key="inspect-pick").value == "ours, renamed"
    at.text_input(key="inspect-new-name-ours, renamed").set_value(f"tokenizer (BPE, {n:,} tokens)")
    at.button(key="inspect-rename").click().run()
    assert any("already the name of another tokenizer" in e.value for e in at.error)


def test_a_link_naming_a_session_only_tokenizer_says_it_is_left_out():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["t"] = ["embedded:", "my upload"]
    at.switch_page("pages/playground.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.multiselect(key="pg-toks").value == ["Qwen (embedded)"]
    assert any("'my upload'" in w.value and "left out" in w.value for w in at.warning)


def test_library_zip_refuses_hostile_contents():
    ok = library_zip({"a": load_shared("gpt2")})
    assert [n for n, _ in load_library_zip(ok)] == ["a"]

    hostile = zip_of({"library.json": json.dumps({"format": "tokenizer-lab-library", "entries": [
        {"name": "x", "folder": "001"}]}).encode(), "001/tokenizer.json": json.dumps(sparse_ids_doc()).encode()})  # fmt: skip
    with pytest.raises(TokenizerLoadError, match="not dense"):
        load_library_zip(hostile)
    with pytest.raises(TokenizerLoadError, match="no library.json"):
        load_library_zip(zip_of({"a.txt": b"x"}))
    with pytest.raises(TokenizerLoadError, match="entry without a name or folder"):
        load_library_zip(zip_of({"library.json": json.dumps({"format": "tokenizer-lab-library", "entries": [
            {"name": "x", "folder": "../../etc"}]}).encode()}))  # fmt: skip


# ====================================================================== downloads are strict JSON
def test_undertrained_jsonl_download_is_strict_json(monkeypatch, tmp_path):
    """A model whose rows 10–19 are NaN: the page notes them and its JSONL holds null, never a bare NaN."""

    folder = tmp_path / "model"
    write_folder(folder, tokenizer_doc())
    data = bytearray(embeddings_file(256, 8))
    head = int.from_bytes(data[:8], "little") + 8
    emb = np.frombuffer(bytes(data[head:]), dtype=np.float32).reshape(2, 256, 8).copy()
    emb[:, 10:20, :] = np.nan
    data[head:] = emb.tobytes()
    (folder / "model.safetensors").write_bytes(bytes(data))
    _allow(monkeypatch, tmp_path)
    downloads = record_downloads(monkeypatch)  # key → bytes (a download built on click is built here)
    at = _app("pages/undertrained.py")
    at.selectbox(key="ut-model-kind").select("Folder or file path on the server").run()
    at.text_input(key="ut-model-path").input(str(folder)).run()
    at.button(key="ut-run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    notes = " ".join(i.value for i in at.info) + " ".join(w.value for w in at.warning)
    assert "10 rows give a NaN" in notes, notes
    jsonl = [v for k, v in downloads.items() if k.endswith("-jsonl")]
    assert jsonl
    rows = [strict_loads(line) for blob in jsonl for line in blob.decode("utf-8").splitlines()]
    assert rows and any(None in r.values() for r in rows)  # the NaN rows' indicators, as null
