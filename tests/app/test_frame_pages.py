"""The way in: the Home page's journeys, the References page, the sidebar library (add an example, remove one)
and the rule that no page-layer string cites papers by number or points to a file the repository lacks."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import streamlit
from streamlit.testing.v1 import AppTest
from support import ROOT

from analysis.core.references import REFERENCES, bibtex_all, markdown_list
from ui.reconnect import STREAMLIT_TEXTS

PAGE_LAYER = [ROOT / "app.py", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "pages").glob("*.py")),
              *sorted((ROOT / "ui").glob("*.py"))]  # fmt: skip
FORBIDDEN = re.compile(r"paper\s*0\d\d|methods\.md", re.IGNORECASE)


def _app(page: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


# ------------------------------------------------------------------------------------------ citations
@pytest.mark.parametrize("path", PAGE_LAYER, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_layer_string_cites_papers_by_number(path):
    """Papers are cited by authors and year; "paper 000" and methods.md mean nothing to a reader of the app."""
    hits = [
        f"{n}: {line.strip()}"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if FORBIDDEN.search(line)
    ]
    assert hits == []


def test_docs_references_are_the_reference_list():
    """docs/references.md is the list of analysis.core.references, and the README links to it."""
    doc = (ROOT / "docs" / "references.md").read_text(encoding="utf-8")
    assert markdown_list() in doc
    assert "(docs/references.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_references_page_lists_every_paper_with_bibtex():
    at = _app("pages/references.py")
    text = "\n".join(m.value for m in at.markdown)
    for r in REFERENCES:
        assert r.title in text and r.authors in text and str(r.year) in text, r.key
    assert [b.label for b in at.get("download_button")] == ["Download BibTeX"]
    assert bibtex_all().count("@") == len(REFERENCES)


# ------------------------------------------------------------------------------------------ home
def _journeys(at: AppTest) -> list[tuple[str, dict[str, list[str]]]]:
    """(page, query parameters) of the Home page's journey links."""
    links = [p.proto for p in at.get("page_link") if p.proto.query_string]
    return [(p.page, parse_qs(p.query_string)) for p in links]


def test_home_is_the_default_page_with_three_journeys_on_real_tokenizers():
    at = _app()
    assert at.title[0].value == "Tokenizer Lab"
    journeys = _journeys(at)
    assert [page for page, _ in journeys] == ["playground", "token_health", "extend"]
    playground = journeys[0][1]
    assert playground["t"] == ["embedded:", "example:gpt2", "example:llama-3.1"] and playground["text"]
    assert journeys[1][1]["t"] == ["example:llama-3.1"]
    # every page of every group is one click away
    linked = {p.proto.page for p in at.get("page_link")}
    src = (ROOT / "app.py").read_text(encoding="utf-8")
    urls = set(re.findall(r'_page\("pages/\w+\.py", "[^"]+", "\w+", "([\w-]+)"', src))
    assert len(urls) >= 13 and urls - {"home"} <= linked


def test_a_journey_opens_its_page_on_its_tokenizers():
    """What one click on the first journey does: the Playground opens with the link's tokenizers and text."""
    at = _app()
    page, params = _journeys(at)[0]
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.multiselect(key="pg-toks").value == ["Qwen (embedded)", "gpt2", "llama-3.1"]
    assert at.text_area(key="pg-text").value == params["text"][0]


# ------------------------------------------------------------------------------------------ sidebar library
def _add_from_sidebar(at: AppTest, name: str) -> None:
    at.sidebar.selectbox(key="sidebar-example").select(name).run()
    at.sidebar.button(key="sidebar-add").click().run()
    assert not at.exception, [e.message for e in at.exception]


@pytest.mark.slow
def test_adding_an_example_selects_it_on_the_current_page():
    at = _app("pages/token_health.py")
    _add_from_sidebar(at, "gpt2")
    assert at.selectbox(key="th-tok").value == "gpt2"
    assert at.sidebar.selectbox(key="sidebar-example").value == "—"  # ready for the next one
    at.switch_page("pages/playground.py").run()
    _add_from_sidebar(at, "llama-2")
    assert at.multiselect(key="pg-toks").value[-1] == "llama-2"
    # a page opened after an addition elsewhere opens on it too: the most recent addition comes first
    at.switch_page("pages/home.py").run()
    _add_from_sidebar(at, "qwen3")
    at.query_params.clear()  # what the Playground wrote into the URL (a browser drops it on navigating)
    at.switch_page("pages/merge_trees.py").run()
    assert at.selectbox(key="mt-tok").value == "qwen3"


@pytest.mark.slow
def test_pages_open_on_what_was_added_last():
    """Vocabulary diff compares the two tokenizers added last (not the embedded default and the first one);
    Chat template, Compression and the Playground's decode box start on the latest one too; on Extend, an
    example added from the sidebar joins the library without replacing the tokenizer the page is working on."""
    at = _app("pages/home.py")
    for name in ("gpt2", "llama-2", "qwen3"):
        _add_from_sidebar(at, name)
    at.switch_page("pages/vocab_diff.py").run()
    assert at.multiselect(key="vd-toks").value == ["llama-2", "qwen3"]
    at.switch_page("pages/chat_template.py").run()
    assert at.selectbox(key="ct-tok").value == "qwen3"
    at.switch_page("pages/drift.py").run()  # two pickers: the two added last
    assert (at.selectbox(key="dr-a").value, at.selectbox(key="dr-b").value) == ("llama-2", "qwen3")
    at.switch_page("pages/compression.py").run()
    assert at.multiselect(key="cmp-toks").value == ["qwen3"]
    at.switch_page("pages/playground.py").run()
    at.text_area(key="pg-dec-ids").set_value("1 2 3").run()
    assert at.selectbox(key="pg-dec-tok").value == "qwen3"
    at.switch_page("pages/extend.py").run()
    at.selectbox(key="ext-tok").select("gpt2").run()
    _add_from_sidebar(at, "llama-3.1")
    assert at.selectbox(key="ext-tok").value == "gpt2" and "llama-3.1" in at.session_state["toklab_library"]
    assert any("llama-3.1" in t.value for t in at.toast)


def test_remove_button_is_a_labelled_delete_icon():
    at = _app("pages/inspect.py")
    _add_from_sidebar(at, "gpt2")
    rm = at.sidebar.button(key="rm-gpt2")
    assert rm.proto.icon == ":material/delete:" and "Remove gpt2" in rm.proto.help
    rm.click().run()
    assert "gpt2" not in at.session_state["toklab_library"]


# ------------------------------------------------------------------------------------------ after a crash
def test_the_connection_error_dialog_is_reworded_by_the_frame():
    """After a crash the dialog asked "Are you connected to the internet?": the frame's script rewrites
    Streamlit's texts, which must still be in the installed front end (a Streamlit upgrade that rewords them
    fails here, not silently in a user's browser)."""
    bundle = "".join(p.read_text(encoding="utf-8", errors="replace")
                     for p in (Path(streamlit.__file__).parent / "static").rglob("*.js"))  # fmt: skip
    for text in STREAMLIT_TEXTS:
        assert text in bundle, text
    at = _app()
    scripts = [h.proto for h in at.get("html") if "__toklabReconnect" in h.proto.body]
    assert len(scripts) == 1 and scripts[0].unsafe_allow_javascript
    assert "scripts/start.sh" in scripts[0].body and "Are you connected to the internet?" in scripts[0].body
