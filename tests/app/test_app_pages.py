"""AppTest for the frame, Load & inspect and Playground pages."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile

import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import script_runner
from streamlit.testing.v1 import AppTest
from support import ROOT, TOKENIZERS, load_shared, static_tables

from analysis import DataError
from analysis.views import playground


@pytest.fixture
def at() -> AppTest:
    """The app opened on Load & inspect (the default page is Home)."""
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    app.switch_page("pages/inspect.py").run()
    assert not app.exception, [e.message for e in app.exception]
    return app


@pytest.mark.slow
def test_default_opens_on_embedded_tokenizer(at):
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Model"] == "BPE"
    assert metrics["Vocabulary (incl. added)"] == "151,646"
    assert metrics["Merges"] == "151,387"
    # vocabulary table (a page of it) and script chart are there
    # the one grid is the vocabulary; the flags and the pre-tokens are static tables drawn with the page
    assert len(at.dataframe) == 1
    flags, pre = static_tables(at)
    assert flags.set_index("flag").loc["byte_fallback", "value"] == "False" and len(pre) > 5
    table = at.dataframe[0].value
    assert table["id"].tolist() == list(range(1_000))
    assert any(c.value == "151,646 of 151,646 tokens; rows 1–1,000 shown" for c in at.caption)
    at.number_input(key="inspect-page").set_value(152).run()
    assert at.dataframe[0].value["id"].tolist() == list(range(151_000, 151_646))
    at.selectbox(key="inspect-sort").set_value("bytes, longest first").run()
    longest = at.dataframe[0].value
    assert at.number_input(key="inspect-page").value == 152 and len(longest) == 646
    at.number_input(key="inspect-page").set_value(1).run()
    longest = at.dataframe[0].value
    assert longest["bytes"].is_monotonic_decreasing and longest["bytes"].iloc[0] >= 100
    at.text_input(key="inspect-q").input("^ĠToken").run()  # a narrower search: back to its one page
    narrow = at.dataframe[0].value
    assert 0 < len(narrow) < 1_000 and narrow["token"].str.startswith("ĠToken").all()
    assert "inspect-page" not in [n.key for n in at.number_input]
    assert not at.get("plotly_chart")  # static first: the chart is SVG
    assert any(m.value.startswith('<svg class="tl-svg-chart"') for m in at.markdown)
    at.toggle(key="inspect-plotly").set_value(True).run()
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["type"] == "bar"


def _allow_server_paths(monkeypatch, *roots) -> None:
    """The operator's switch for trusted local use: server-side paths under `roots`."""
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", os.pathsep.join(str(r) for r in roots))


def test_load_from_folder_and_search(at, monkeypatch):
    _allow_server_paths(monkeypatch, TOKENIZERS)
    at.run()
    at.text_input(key="inspect-path").input(str(TOKENIZERS / "llama-2")).run()
    at.button(key="inspect-load-path").click().run()
    assert not at.exception
    assert at.selectbox(key="inspect-pick").value == "llama-2"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Vocabulary (incl. added)"] == "32,000"
    flags = static_tables(at)[0]
    assert flags.set_index("flag").loc["byte_fallback", "value"] == "True"
    at.text_input(key="inspect-q").input("^<0x4").run()
    table = at.dataframe[0].value
    assert len(table) == 16 and table["token"].str.startswith("<0x4").all()


def test_bad_path_shows_clear_error(at, tmp_path, monkeypatch):
    _allow_server_paths(monkeypatch, tmp_path)
    at.run()
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    at.text_input(key="inspect-path").input(str(tmp_path)).run()
    at.button(key="inspect-load-path").click().run()
    assert not at.exception
    assert any("not valid JSON" in e.value for e in at.error)


def test_upload_zip_with_parent_path_is_refused(at):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("../evil/tokenizer.json", "{}")
    at.file_uploader(key="inspect-upload").set_value(("evil.zip", buf.getvalue(), "application/zip")).run()
    at.button(key="inspect-add-upload").click().run()
    assert not at.exception
    assert any("'..'" in e.value for e in at.error)


def test_playground_side_by_side_from_url():
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    app.query_params["t"] = ["example:gpt2", "embedded:", "example:llama-2", "example:bert-base-uncased"]
    app.query_params["text"] = "Hello world, tere maailm"
    app.switch_page("pages/playground.py").run()
    assert not app.exception, [e.message for e in app.exception]
    assert app.multiselect(key="pg-toks").value == ["gpt2", "Qwen (embedded)", "llama-2", "bert-base-uncased"]
    table = static_tables(app)[0].set_index("tokenizer")
    gpt2 = load_shared("gpt2").tokenizer.encode("Hello world, tere maailm", add_special_tokens=False)
    assert table.loc["gpt2", "tokens"] == len(gpt2.ids)
    assert table.loc["bert-base-uncased", "tokens"] > 0
    assert len([h for h in app.get("html") if "tl-spans" in h.proto.body]) == 4  # the frame adds a style
    # boundaries differ between tokenizers somewhere in this text
    assert table["differing boundaries"].sum() > 0


def test_playground_url_allow_list_ignores_unknown_sources():
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    app.query_params["t"] = ["path:/etc", "python:os.system('x')", "embedded:"]
    app.query_params["evil"] = "1"
    app.switch_page("pages/playground.py").run()
    assert not app.exception
    assert app.multiselect(key="pg-toks").value == ["Qwen (embedded)"]


def test_every_page_url_is_its_file_name():
    """A fresh server answers a deep link in legacy pages/ mode first; ui/__init__ then switches to st.navigation.

    That hand-over only works when the URL path equals the page file's stem.
    """
    src = (ROOT / "app.py").read_text(encoding="utf-8")
    pages = re.findall(r'_page\("pages/(\w+)\.py", "[^"]+", "\w+", "([\w-]+)"', src)
    assert len(pages) == len(list((ROOT / "pages").glob("*.py"))) >= 9
    assert all(stem == url for stem, url in pages), pages


@pytest.mark.slow
def test_first_deep_link_of_a_fresh_server_runs_in_the_frame():
    """The one Streamlit workaround (ui/__init__.py): a fresh process's first run of a deep link goes through app.py.

    Streamlit 1.67 flags an app with a `pages/` folder as legacy until `st.navigation` first runs, and then executes
    a deep link's page file alone. If this test fails after a Streamlit upgrade, revisit `_leave_legacy_pages_mode`:
    the private attribute or the legacy runner may be gone (then the workaround can go too) or have changed.
    """
    assert hasattr(PagesManager, "uses_pages_directory"), (
        "Streamlit dropped PagesManager.uses_pages_directory"
    )
    assert hasattr(script_runner, "_mpa_v1"), "Streamlit dropped its legacy pages/ runner"
    # a fresh process: the first AppTest run of a deep link is what a fresh server's first request does
    script = (
        "import json\n"
        "from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({str(ROOT / 'app.py')!r}, default_timeout=120)\n"
        "at.switch_page('pages/playground.py').run()\n"
        "print(json.dumps({'exception': [e.message for e in at.exception], 'title': [t.value for t in at.title],\n"
        "                  'sidebar': [m.value for m in at.sidebar.markdown]}))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["exception"] == []
    assert got["title"] == ["Playground"]
    assert any("Tokenizer library" in m for m in got["sidebar"]), "the page ran without the app.py frame"


@pytest.mark.slow
def test_every_page_renders_on_the_default_tokenizer():
    """Walk every page of the navigation with the embedded default: no exception, no error box, sidebar drawn."""
    src = (ROOT / "app.py").read_text(encoding="utf-8")
    pages = re.findall(r'_page\("(pages/\w+\.py)"', src)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    for page in pages:
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])
        assert not at.error, (page, [e.value for e in at.error])
        assert at.title, page
        assert any("Tokenizer library" in m.value for m in at.sidebar.markdown), page


def _fail_with(exc: Exception):
    def fail(*args, **kwargs):
        raise exc

    return fail


def test_analysis_error_in_a_page_is_an_error_box(at, monkeypatch):
    """The frame shows a page's AnalysisError as its message; the sidebar library is still drawn."""
    monkeypatch.setattr(
        playground, "compare_encodings", _fail_with(DataError("this text cannot be compared"))
    )
    at.switch_page("pages/playground.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert [e.value for e in at.error] == ["this text cannot be compared"]
    assert not at.expander or all(x.label != "Details" for x in at.expander)
    assert any("Tokenizer library" in m.value for m in at.sidebar.markdown)


def test_a_bug_in_a_page_is_a_short_box_with_details(at, monkeypatch):
    """Any other exception: type and message in a box, the traceback only in a collapsed expander."""
    monkeypatch.setattr(playground, "compare_encodings", _fail_with(KeyError("lost")))
    at.switch_page("pages/playground.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert len(at.error) == 1 and "KeyError" in at.error[0].value and "lost" in at.error[0].value
    details = [x for x in at.expander if x.label == "Details"]
    assert details and "Traceback" in details[0].code[0].value
    assert any("Tokenizer library" in m.value for m in at.sidebar.markdown)


def test_pages_never_call_st_stop():
    """st.stop() drops everything after it in the run, including the sidebar library app.py draws last."""
    offenders = [
        p.name for p in (ROOT / "pages").glob("*.py") if "st.stop()" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []


def test_pages_use_only_their_own_state_keys():
    """Links between pages go through the URL (ui.links), never through another page's session-state keys."""
    pattern = re.compile(r'(?:key=|session_state\[|session_state\.\w+\()\s*f?"([a-z]+)-')
    prefixes = {
        p.stem: set(pattern.findall(p.read_text(encoding="utf-8"))) for p in (ROOT / "pages").glob("*.py")
    }
    prefixes = {
        k: v for k, v in prefixes.items() if v
    }  # pages without widget keys (Home) have nothing to share
    assert all(len(v) == 1 for v in prefixes.values()), prefixes
    assert len({next(iter(v)) for v in prefixes.values()}) == len(prefixes), "two pages share a key prefix"
    shared = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "ui").glob("*.py"))
    used = set(pattern.findall(shared))
    assert not used & {next(iter(v)) for v in prefixes.values()}, used


def test_playground_with_nothing_picked_says_so(at):
    at.switch_page("pages/playground.py")
    at.run()
    at.multiselect(key="pg-toks").set_value([]).run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("Pick at least one tokenizer" in i.value for i in at.info)


def test_playground_opens_a_merge_tree():
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    app.query_params["t"] = ["example:gpt2"]
    app.query_params["text"] = "Hello tokenizers"
    app.switch_page("pages/playground.py").run()
    assert not app.exception
    ids = load_shared("gpt2").tokenizer.encode("Hello tokenizers").ids
    app.selectbox(key="pg-tree-id").select(ids[-1]).run()
    app.button(key="pg-open-tree").click().run()
    assert not app.exception, [e.message for e in app.exception]
    assert app.session_state["mt-q"] == f"#{ids[-1]}"
    assert app.selectbox(key="mt-tok").value == "gpt2"
    assert app.get("plotly_chart"), "the merge tree is drawn"


def test_inspect_row_selection_offers_merge_tree(at):
    # the vocabulary table is selectable; without a selection the page says how to open a tree
    assert any("Select a row to open its merge tree" in c.value for c in at.caption)
