"""AppTest for the corpus-job panel (ui/corpus_jobs.py) on the Prune, Extend and SA-BPE pages: the page submits a
job of the queue (kind "corpus-stats", local executor, 2 workers, a few FLORES files: a server folder, or uploads
stored in the workspace), a worker's run of it (here in this process) gives the page the in-process result, a reload
re-attaches to it, and the same inputs find the same job; paths outside the allowed folders are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
from download_support import record_downloads, without_timings
from streamlit.testing.v1 import AppTest
from support import FLORES, ROOT, TOKENIZERS, load_shared, run_page_job, static_tables

from analysis.cli import main
from analysis.core.workspace import default_store
from analysis.jobs import ExecutorConfig, compute, train_from_words
from analysis.jobs.corpus_job import corpus_result
from analysis.jobs.queue import default_jobs
from analysis.methods import pruning as P
from analysis.texts.code import code_dir
from analysis.tokenizer.defaults import DEFAULT_NAME, default_tokenizer

DEVTEST = FLORES / "devtest"
PATTERN = "e[ns]t_Latn.devtest"  # two files, eng_Latn and est_Latn


@pytest.fixture
def server_paths(monkeypatch, tmp_path):
    """Server paths on, allowed under the FLORES devtest folder; job workdirs in a fresh cache."""
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(DEVTEST))
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path


def _app(page: str, ws: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["toklab_library"] = {DEFAULT_NAME: default_tokenizer(), "gpt2": load_shared("gpt2")}
    if ws is not None:
        at.session_state["toklab-ws"] = ws  # another session of the same workspace: a reload
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _ws(at: AppTest) -> str:
    ws = at.query_params["ws"]
    return ws[0] if isinstance(ws, list) else ws


def _run_job(at: AppTest, key: str, tok_name: str = "gpt2") -> object:
    """The page's job is queued (no worker here): run it as a worker would, rerun the page; the job's result as
    the page reads it."""
    bar = at.get("progress")
    assert bar and "Corpus job · Queued" in bar[0].proto.text, [b.proto.text for b in bar]
    job = run_page_job(at, key)
    assert job.state == "done", job.error
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert not at.get("progress")  # the panel is gone: the result is on the page
    path = default_store().file_path(_ws(at), "artifact", job.result["counts"])
    return corpus_result(load_shared(tok_name), job.result, path)


def _inprocess(stat: str, options: dict | None = None):
    return compute(load_shared("gpt2"), stat, [str(DEVTEST / PATTERN)], options=options,
                   executor=ExecutorConfig(kind="inprocess")).result  # fmt: skip


@pytest.mark.slow
def test_prune_frequency_order_from_a_background_corpus_job(server_paths):
    at = _app("pages/prune.py")
    at.selectbox(key="prune-tok").set_value("gpt2").run()
    at.selectbox(key="prune-order").set_value("frequency").run()
    at.radio(key="prune-freq-src").set_value("a corpus (background job)").run()
    at.text_input(key="prune-corpus-folder").set_value(str(DEVTEST)).run()
    at.text_input(key="prune-corpus-pattern").set_value(PATTERN).run()
    at.number_input(key="prune-corpus-workers").set_value(2).run()
    assert not at.error, [e.value for e in at.error]
    at.button(key="prune-corpus-start").click().run()
    counts = _run_job(at, "prune-corpus")
    ref = _inprocess("token-ids")
    assert np.array_equal(counts, ref) and ref.sum() > 50_000
    order = P.compute_order(load_shared("gpt2"), "frequency", counts=ref)
    n = int(at.number_input(key="prune-n").value)

    def next_ids(page: AppTest) -> list[int]:
        table = next(d for d in static_tables(page) if list(d.columns) == ["id", "token", "raw", "order key"])
        return table["id"].tolist()

    assert next_ids(at) == list(order.ids[n : n + 25])
    # the same inputs again: the same job (done: nothing queued)
    ws, job_id = _ws(at), default_store().inputs(_ws(at))["job:prune-corpus"]
    at.button(key="prune-corpus-start").click().run()
    assert default_store().inputs(ws)["job:prune-corpus"] == job_id and not at.get("progress")
    # a reload (a new session of the workspace, the folder field empty): the job's counts are shown again
    again = _app("pages/prune.py", ws)
    again.selectbox(key="prune-tok").set_value("gpt2").run()
    again.selectbox(key="prune-order").set_value("frequency").run()
    again.radio(key="prune-freq-src").set_value("a corpus (background job)").run()
    assert not again.exception and not again.error, [e.value for e in again.error]
    assert next_ids(again) == list(order.ids[n : n + 25])


@pytest.mark.slow
def test_corpus_folder_outside_the_allowed_roots_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(tmp_path))
    at = _app("pages/prune.py")
    at.selectbox(key="prune-tok").set_value("gpt2").run()
    at.selectbox(key="prune-order").set_value("frequency").run()
    at.radio(key="prune-freq-src").set_value("a corpus (background job)").run()
    at.text_input(key="prune-corpus-folder").set_value(str(DEVTEST)).run()
    assert any("outside the allowed folders" in e.value for e in at.error), [e.value for e in at.error]
    assert at.button(key="prune-corpus-start").disabled
    (tmp_path / "a.txt").write_text("some text\n", encoding="utf-8")
    at.text_input(key="prune-corpus-folder").set_value(str(tmp_path)).run()
    at.text_input(key="prune-corpus-pattern").set_value("../*").run()
    assert any("refused pattern" in e.value for e in at.error), [e.value for e in at.error]


def _extend_page(monkeypatch) -> tuple[AppTest, dict]:
    seen = record_downloads(monkeypatch)
    at = _app("pages/extend.py")
    at.selectbox(key="ext-tok").set_value("gpt2").run()
    at.multiselect(key="ext-corpora").set_value([]).run()  # FLORES training lines only
    at.multiselect(key="ext-others").set_value([]).run()
    at.multiselect(key="ext-methods").set_value(["continued"]).run()
    at.number_input(key="ext-nmax").set_value(150).run()
    return at, seen


def _extend_report(at: AppTest, seen: dict) -> dict:
    at.button(key="ext-train").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    at.button(key="ext-build").click().run()
    assert not at.exception and not at.error
    return json.loads(seen["ext-report"])


@pytest.mark.slow
def test_extend_page_report_is_the_cli_json(monkeypatch, capsys):
    at, seen = _extend_page(monkeypatch)
    at.number_input(key="ext-minfreq").set_value(3).run()
    page_doc = _extend_report(at, seen)
    capsys.readouterr()
    args = ["extend", "--tokenizer", str(TOKENIZERS / "gpt2"), "--method", "continued", "--flores", "est_Latn",
            "--heldout-flores", "est_Latn", "--n", "150", "--min-frequency", "3", "--json"]  # fmt: skip
    assert main(args) == 0
    cli_doc = json.loads(capsys.readouterr().out)
    for doc in (page_doc, cli_doc):
        doc.pop("text")  # how each names the same FLORES training lines
    assert without_timings(page_doc) == without_timings(cli_doc)
    assert page_doc["min_frequency"] == 3 and page_doc["added"] == 150 and page_doc["unreachable_added"] == 0


@pytest.mark.slow
def test_extend_continued_words_from_uploads_counted_by_a_corpus_job(monkeypatch, tmp_path):
    """The default start (server paths off): two uploaded files, stored in the workspace, counted by a corpus job;
    continued training from its words is the CLI's training on the same words."""
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    at, seen = _extend_page(monkeypatch)
    at.radio(key="ext-words-src").set_value("a corpus (background job)").run()
    files = sorted(DEVTEST.glob(PATTERN))
    uploads = [(f.name, f.read_bytes(), "text/plain") for f in files]
    at.file_uploader(key="ext-corpus-upload").set_value(uploads).run()
    at.number_input(key="ext-corpus-workers").set_value(2).run()
    at.button(key="ext-corpus-start").click().run()
    ws = _ws(at)
    job = default_jobs().get(ws, default_store().inputs(ws)["job:ext-corpus"])
    assert [name for _, name in job.params["uploads"]] == [f.name for f in files] and not job.params["files"]
    words = _run_job(at, "ext-corpus")
    ref_words = _inprocess("words")
    assert words.words == ref_words.words and words.chars == ref_words.chars
    gpt2 = load_shared("gpt2")
    ref = train_from_words(gpt2, ref_words, 150)
    doc = _extend_report(at, seen)
    assert doc["added"] == 150 and doc["corpus"] == {"executor": "local", "inputs": [f.name for f in files],
                                                     "workers": 2}  # fmt: skip
    assert without_timings(doc["training"]) == without_timings(ref.to_json())
    assert [t["token"] for t in doc["added_tokens"]] == [s.token for s in ref.prefix(150) if s.new]


@pytest.mark.slow
def test_sabpe_trains_on_words_from_a_background_corpus_job(monkeypatch, tmp_path):
    """SA-BPE page, code corpus counted by a corpus job (2 workers): the page's words equal the in-process
    count of the same files and options, and its report says where they came from."""
    code = code_dir()
    monkeypatch.setenv("TOKLAB_SERVER_PATHS", "1")
    monkeypatch.setenv("TOKLAB_SERVER_ROOTS", str(code))
    monkeypatch.setenv("TOKLAB_CACHE", str(tmp_path / "cache"))
    seen = record_downloads(monkeypatch)
    at = _app("pages/sabpe.py")
    at.selectbox(key="sa-base").set_value("gpt2").run()
    at.multiselect(key="sa-langs").set_value(["tcl", "vimscript"]).run()
    at.number_input(key="sa-files").set_value(1).run()
    at.number_input(key="sa-vocab").set_value(400).run()
    at.radio(key="sa-source").set_value("a code corpus (background job)").run()
    at.text_input(key="sa-corpus-folder").set_value(str(code)).run()
    at.text_input(key="sa-corpus-pattern").set_value("*.jsonl.gz").run()
    at.number_input(key="sa-corpus-workers").set_value(2).run()
    assert not at.error, [e.value for e in at.error]
    at.button(key="sa-corpus-start").click().run()
    words = _run_job(at, "sa-corpus")
    opts = {"languages": ["tcl", "vimscript"], "max_files_per_repo": 1, "max_bytes_per_repo": None}
    ref = compute(load_shared("gpt2"), "source-words", [str(code / "*.jsonl.gz")], options=opts,
                  executor=ExecutorConfig(kind="inprocess")).result  # fmt: skip
    assert words.words == ref.words and len(ref.words) > 100
    at.button(key="sa-train").click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    doc = json.loads(seen["sa-dl-report"])
    assert doc["sabpe"]["vocab_size"] == 400 and doc["sabpe"]["languages"] == 2
    # where the words came from, by the files' names in the shared corpora (never the server's absolute path)
    named = doc["corpus"]
    assert named and all(c.startswith("code/") and c.endswith(".jsonl.gz") for c in named), named
    assert not any(str(code) in c for c in doc["corpus"])
