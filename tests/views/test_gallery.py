"""The example gallery: computed once into the disk store, read back without computing (engine, CLI and page)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest
from support import FLORES, ROOT, TOKENIZERS, load_shared, need_minilm, static_tables

import analysis.views.gallery as gallery
from analysis.cli import main
from analysis.measure import grid
from analysis.methods.undertrained import analyze
from analysis.model.demo_models import demo_model, weights_path
from analysis.texts import flores as fl
from ui.svg import Box

LANGS = ("eng_Latn", "est_Latn", "zho_Hans")
FOLDERS = {"gpt2": TOKENIZERS / "gpt2", "bert-base-uncased": TOKENIZERS / "bert-base-uncased"}


@pytest.fixture
def small_world(tmp_path, monkeypatch):
    """Three FLORES languages, two example tokenizers and an empty disk store."""
    d = tmp_path / "flores"
    d.mkdir()
    for c in LANGS:
        (d / f"{c}.devtest").write_bytes((FLORES / "devtest" / f"{c}.devtest").read_bytes())
    monkeypatch.setenv("TOKLAB_FLORES", str(d))
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gallery, "example_folders", lambda: dict(FOLDERS))
    monkeypatch.setattr(gallery, "fetched_models", lambda: [])  # the demo models: their own test below
    return d


def test_build_once_then_read_without_computing(small_world, monkeypatch):
    assert gallery.read_gallery().missing == list(FOLDERS)
    built = gallery.build_gallery()
    assert not built.missing and {e.name for e in built.entries} == set(FOLDERS)
    e = next(e for e in built.entries if e.name == "gpt2")
    rows = grid.compression_table([load_shared("gpt2")], fl.dataset(), list(LANGS))
    assert e.bytes_per_token == {r["lang"]: r["bytes_per_token"] for r in rows}
    assert e.parity["languages"] == 2  # English against itself left out
    assert (
        e.stt["unreachable"] == 0 and next(x for x in built.entries if x.name != "gpt2").stt is None
    )  # BERT
    monkeypatch.setattr(
        gallery, "compute_entry", lambda *a, **k: pytest.fail("the stored entry was recomputed")
    )
    again = gallery.build_gallery()
    assert [x.to_json() for x in again.entries] == [x.to_json() for x in built.entries]


def test_gallery_cli(small_world, capsys):
    assert main(["gallery", "--read-only"]) == 0
    assert "not computed yet: gpt2, bert-base-uncased" in capsys.readouterr().out
    assert main(["gallery", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not doc["missing"] and len(doc["entries"]) == 2


def test_gallery_page_reads_the_store_and_never_computes(small_world, monkeypatch):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/gallery.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("0 of 2 example tokenizers ready" in i.value for i in at.info)
    built = gallery.build_gallery()
    monkeypatch.setattr(gallery, "compute_entry", lambda *a, **k: pytest.fail("the page computed"))
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    # the first view: static elements only (a table and an SVG chart: no front-end module to load first)
    assert not at.dataframe and not at.get("plotly_chart")
    assert not at.table  # nor Arrow's (Streamlit's st.table)
    table = static_tables(at)[0].set_index("Tokenizer")
    e = next(e for e in built.entries if e.name == "gpt2")
    assert table.loc["gpt2", "Bytes/token, mean"] == float(f"{e.summary['mean']:.3f}")
    assert table.loc["gpt2", "STT-unreachable"] == "0"  # a text column: "—" where a tokenizer is not BPE
    svg = next(m.value for m in at.markdown if m.value.startswith("<svg"))
    assert svg.count("<rect") == len(built.entries) == 2  # a box per tokenizer
    outliers = sum(len(Box.of(list(x.bytes_per_token.items())).outliers) for x in built.entries)
    assert svg.count("<circle") == outliers
    at.toggle(key="gal-interactive").set_value(True).run()  # the interactive chart on request
    assert not at.exception and len(at.get("plotly_chart")) == 1


@pytest.mark.slow
@need_minilm
def test_demo_model_candidates_are_stored_shown_and_never_recomputed(small_world, monkeypatch):
    """A fetched demo model's under-trained candidates: computed once (the engine's own `analyze`), stored, read
    back by the page and the CLI without computing."""
    minilm = demo_model("minilm")
    monkeypatch.setattr(gallery, "fetched_models", lambda: [minilm])
    monkeypatch.setattr(gallery, "example_folders", lambda: {})
    assert gallery.read_gallery().models_missing == ["minilm"]
    built = gallery.build_gallery()
    (m,) = built.models
    r = analyze(str(weights_path(minilm)))
    assert m.n_candidates == len(r.candidates) > 0 and m.main == r.main and m.n_rows == r.n_rows
    assert [c["id"] for c in m.candidates] == r.candidates[: gallery.TOP_CANDIDATES]
    assert [c["token"] for c in m.candidates] == [r.tokens[i] for i in r.candidates[: gallery.TOP_CANDIDATES]]
    assert sum(m.classes.values()) == m.n_candidates
    monkeypatch.setattr(gallery, "compute_model_entry", lambda *a, **k: pytest.fail("recomputed"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/gallery.py").run()
    assert not at.exception, [e.message for e in at.exception]
    shown = next(t for t in static_tables(at) if "Token" in t.columns)  # the first ten, a static table
    assert list(shown["Id"]) == [c["id"] for c in m.candidates[:10]]
    assert list(shown["Token"]) == [c["token"] for c in m.candidates[:10]]
    at.toggle(key="gal-model-all-minilm").set_value(True).run()  # all stored candidates, sortable, on request
    every = next(d.value for d in at.dataframe if "Token" in d.value.columns)
    assert list(every["Id"]) == [c["id"] for c in m.candidates]
    assert main(["gallery", "--json"]) == 0


def test_folder_key_hashes_a_folder_once_and_again_after_a_change(tmp_path, monkeypatch):
    """The gallery's key of an example folder is computed from its files once per process (a fresh server's
    warm-up does it), and again when a file changes (size or modification time)."""
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes((TOKENIZERS / "gpt2" / "tokenizer.json").read_bytes())
    first = gallery.folder_key(folder)
    reads = []
    real = type(folder).read_bytes
    monkeypatch.setattr(type(folder), "read_bytes", lambda p: reads.append(p.name) or real(p))
    assert gallery.folder_key(folder) == first and reads == []  # from the memo: no file read
    (folder / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    second = gallery.folder_key(folder)
    assert second != first and sorted(reads) == ["tokenizer.json", "tokenizer_config.json"]
    monkeypatch.undo()
    gallery._hash_files.cache_clear()
    assert gallery.folder_key(folder) == second  # the memo never changes the key
