"""Simulated users in a real browser: N users at once through one journey of the app, p50/p95 per step, errors,
the server's (and its workers') RSS, and a soak (issue 53, "Measured").

A fresh server started as `scripts/start.sh` starts it (`scripts/serve.py`, 127.0.0.1, a free port) with a fresh
`TOKLAB_DATA` temporary folder, and Debian chromium through Playwright: one browser, one browser context (a
separate profile: its own cookies, caches and Streamlit session, its own workspace) per simulated user. Every wait
is a condition (the browser tests' "run drawn" condition of `tests/e2e/e2e_support.py`, a text or a button), never
a pause; each step has a time limit (`--step-timeout`), and a step that fails or times out is counted as an error
with its message (the user's journey then stops; the steps it did not reach are counted as skipped).

The journey (:data:`JOURNEY`): **home** (a new tab opens the app), **playground_switch** (the top bar's link),
**playground_redraw** (type a new text, commit it, its tokens drawn; `--redraws` times), **add_example** (the
sidebar's "Add an example"), **inspect_switch**, **upload** (a tokenizer.json from `$TOKLAB_ASSETS/tokenizers`
through Load & inspect's Upload tab, until it is in the library), **compression_switch**, **compression** (the
uploaded tokenizer on 20 FLORES languages: Compute → the result line), **inspect** (Load & inspect on the upload,
its vocabulary drawn), and the model-side job (:data:`MODEL_STEPS`, `--model-step`): today the Extend page's model
check on the fetched SmolLM2 (**model_train** — Extend's Train on SmolLM2-135M-Instruct for Estonian, **model_job**
— "Check the model" → its result). The job's end is recognised by what the page shows (the result's download
button, or an error), not by how the job runs, so the step works whether the check runs in a server thread or as
a queued worker job that the page polls. User i checks `--model-lines` + i lines per language, so that no two
users' jobs are identical (a queue runs identical jobs once).

Phases, for each N of `--users`:

* **journey**: N users start together; each runs the whole journey in a new context, which is closed after it.
* **mixed** (light steps under load): `min(--heavy, N)` further contexts each run a heavy job (Compression on 20
  languages, then the model job) while N light users loop Home, a Playground redraw and a page switch until every
  heavy job has ended: the light steps' p50/p95 under load (target: p95 ≤ 3 s at N = 8 with 4 heavy jobs).
* after each phase the contexts are closed and the server's RSS is read again (`--settle S` waits S seconds and
  reads it once more: whether closed tabs give memory back).

`--soak M`: 4 users (`--soak-users`) repeat the journey without the model job, each round in a new context, for M
minutes; RSS is read every second: growth from the end of the first round to the end of the last (target ≤ 10 %).

The baseline is N = 1 of the same run (the first of `--users`): every step's p95 at N is printed as a ratio to it,
and the targets as ratios (≤ 1 is met). Server RSS: the server process and its children (worker processes a
queue starts), plus any `python -m analysis worker` process of the same data folder.

    python bench/bench_users.py                                   # N = 1, 4, 8, 16, 20, then a 10-minute soak
    python bench/bench_users.py --users 1,2 --soak 1              # a dry run on a busy machine
    python bench/bench_users.py --model-step none                 # no model-side job

Protocol-level clients (`bench/_st_protocol.py`: the app's websocket protocol without a browser, where chromium runs
out — on 2 cores eight chromium contexts take ~95 % of the CPU a phase uses, and a light step's time is then mostly
the users' own drawing): `--light-clients protocol` makes the mixed phase's light users such clients (the heavy
users stay browsers), and `--protocol-users K` makes K of each journey phase's N users such clients on the light
steps of the journey (Home, Playground, redraws, page switches; their rows are named `proto:…`), repeated (a new
session each time) until the last browser user's journey has ended, so that all N are there the whole phase. A
protocol step is timed from the message sent to the server's end of that run: the server's side of the step,
without drawing. The results name which clients ran (`light_clients`, `protocol_users`).

Ctrl-C (or SIGTERM) stops the run: the browser contexts are closed and the server's process group is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from _results import Run, variant_from
from _st_protocol import ProtocolUser

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "e2e")]
from e2e_support import _IDLE_JS as APP_IDLE_JS  # noqa: E402 - the browser tests' one "run drawn" condition
from e2e_support import RunTracker  # noqa: E402 - which reruns a page asked for and which have ended
from playwright.async_api import Browser, BrowserContext, Page, async_playwright  # noqa: E402
from playwright.async_api import TimeoutError as PlaywrightTimeout  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage"]  # fmt: skip
SERVER_START_S = 300
#: The steps of the journey, in order (the model job's steps come from `MODEL_STEPS`).
JOURNEY = ("home", "playground_switch", "playground_redraw", "add_example", "inspect_switch", "upload",
           "compression_switch", "compression", "inspect")  # fmt: skip
#: Light steps: what a user does without asking for heavy work (the issue's "Home, Playground redraw, page switch").
LIGHT = ("home", "playground_redraw", "page_switch")
#: Targets on 2 cores (issue 53).
TARGET_LIGHT_P95_S = 3.0
TARGET_LIGHT_USERS = 8
TARGET_HEAVY_JOBS = 4
TARGET_ERROR_USERS = 20
TARGET_SOAK_GROWTH = 0.10
TARGET_SOAK_MINUTES = 10
TARGET_SOAK_USERS = 4
#: The Compression step's 20 languages: the page's default list (10) and 10 more typed into it.
MORE_LANGS = ("fin_Latn", "lvs_Latn", "lit_Latn", "ukr_Cyrl", "spa_Latn", "por_Latn", "tur_Latn", "ell_Grek",
              "heb_Hebr", "vie_Latn")  # fmt: skip
PAGE_LANGS = 10
#: The pages the journey switches to through the top bar: title → url path (app.py).
NAV_PATHS = {"Playground": "playground", "Load & inspect": "inspect", "Compression": "compression"}
EXAMPLE = "gpt2"
MODEL_TOKENIZER = "smollm2-135m-instruct"
MODEL_LABEL = "SmolLM2-135M-Instruct (GGUF, fetched)"
#: Every text typed into the Playground carries this marker and a counter: "its tokens drawn" is the marker seen.
TYPED = "Benchmarkword{k}q tere hommikust, kallid sõbrad; 東京 Привет {k}."
SPANS_DRAWN_JS = """(word) => {
  const el = [...document.querySelectorAll('.tl-spans')];
  return el.length > 0 && el.every((e) => e.innerText.includes(word));
}"""
#: An app error on the page: an exception box or an error alert.
APP_ERROR = '[data-testid="stException"], [data-testid="stAlertContentError"]'


#: `-v`: a line per step as it ends.
VERBOSE = False


class StepError(Exception):
    """A step that failed: its message is what the report counts."""


# ---------------------------------------------------------------------------------------------- statistics
def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0–100) of `values` by linear interpolation between closest ranks (numpy's default);
    None for no values."""
    xs = sorted(values)
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def ratio(value: float | None, reference: float | None) -> float | None:
    """value / reference, None when either is missing or the reference is not positive."""
    if value is None or reference is None or reference <= 0:
        return None
    return value / reference


def _r(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(x, digits)


@dataclass
class Tally:
    """Every timed step of a phase: seconds per step name, errors with their messages, skipped steps."""

    times: dict[str, list[float]] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, step: str, seconds: float) -> None:
        """One step that ended well, in `seconds`."""
        self.times.setdefault(step, []).append(seconds)

    def error(self, step: str, user: str, message: str) -> None:
        """One step that failed (its message on one line, at most 300 characters)."""
        one = " ".join(str(message).split())
        self.errors.append({"step": step, "user": user, "message": one[:300]})

    def skip(self, steps: Sequence[str]) -> None:
        """Steps a user did not reach (an earlier one failed)."""
        for s in steps:
            self.skipped[s] = self.skipped.get(s, 0) + 1

    def rows(self) -> list[dict[str, Any]]:
        """One row per step: count, p50, p95 and max (seconds), errors."""
        names = list(self.times) + [e["step"] for e in self.errors if e["step"] not in self.times]
        out = []
        for s in dict.fromkeys(names):
            xs = self.times.get(s, [])
            out.append({"step": s, "n": len(xs), "p50_s": _r(percentile(xs, 50)), "p95_s": _r(percentile(xs, 95)),
                        "max_s": _r(max(xs) if xs else None),
                        "errors": sum(e["step"] == s for e in self.errors)})  # fmt: skip
        return out

    def light(self) -> list[float]:
        """The light steps' times together (Home, Playground redraw, every page switch)."""
        bare = {s: s.removeprefix(PROTO) for s in self.times}
        return [
            t for s, xs in self.times.items() if bare[s] in LIGHT or bare[s].endswith("_switch") for t in xs
        ]


def error_summary(errors: Sequence[dict[str, str]], most: int = 10) -> list[dict[str, Any]]:
    """Errors grouped by step and message, most frequent first (at most `most` groups)."""
    counts: dict[tuple[str, str], int] = {}
    for e in errors:
        key = (e["step"], e["message"])
        counts[key] = counts.get(key, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:most]
    return [{"step": s, "count": n, "message": m} for (s, m), n in top]


def print_table(title: str, rows: list[dict[str, Any]], base: dict[str, float] | None = None) -> None:
    """A step table on stdout, with each p95's ratio to the baseline's (`base`: step → p95) where given."""
    print(f"\n{title}")
    print(f"  {'step':<20} {'n':>4} {'p50 s':>8} {'p95 s':>8} {'max s':>8} {'errors':>6}  p95 vs N=1")
    for r in rows:
        rel = ratio(r["p95_s"], (base or {}).get(r["step"]))

        def f(x: float | None) -> str:
            return "—" if x is None else f"{x:.2f}"

        print(f"  {r['step']:<20} {r['n']:>4} {f(r['p50_s']):>8} {f(r['p95_s']):>8} {f(r['max_s']):>8} "
              f"{r['errors']:>6}  {'—' if rel is None else f'{rel:.2f}x'}")  # fmt: skip


def verdicts(phases: list[dict[str, Any]], soak: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Each target with its measured value, the ratio to the target (≤ 1 is met) and whether it was measured at
    the size the target names (a smaller run gives the nearest size, `measured_at`)."""
    out: dict[str, dict[str, Any]] = {}
    journeys = [p for p in phases if p["phase"] == "journey"]
    if journeys:
        big = max(journeys, key=lambda p: p["users"])
        out["errors_at_20_users"] = {"value": big["errors"], "target": 0, "measured_at": big["users"],
                                     "ratio": None, "met": big["errors"] == 0 if big["users"] >= TARGET_ERROR_USERS else None}  # fmt: skip
    mixed = [p for p in phases if p["phase"] == "mixed" and p.get("light_p95_s") is not None]
    if mixed:
        near = min(mixed, key=lambda p: abs(p["users"] - TARGET_LIGHT_USERS))
        full = near["users"] == TARGET_LIGHT_USERS and near["heavy"] >= TARGET_HEAVY_JOBS
        rel = ratio(near["light_p95_s"], TARGET_LIGHT_P95_S)
        out["light_p95_at_8_users_4_heavy_s"] = {"value": near["light_p95_s"], "target": TARGET_LIGHT_P95_S,
                                                 "measured_at": f"{near['users']} users, {near['heavy']} heavy",
                                                 "ratio": _r(rel), "met": (rel <= 1) if full and rel is not None else None}  # fmt: skip
    if soak and soak.get("growth") is not None:
        full = soak["minutes"] >= TARGET_SOAK_MINUTES and soak["users"] >= TARGET_SOAK_USERS
        rel = ratio(soak["growth"], TARGET_SOAK_GROWTH)
        out["soak_rss_growth"] = {"value": soak["growth"], "target": TARGET_SOAK_GROWTH,
                                  "measured_at": f"{soak['users']} users, {soak['minutes']} min",
                                  "ratio": _r(rel), "met": (rel <= 1) if full and rel is not None else None}  # fmt: skip
    return out


def print_verdicts(v: dict[str, dict[str, Any]]) -> None:
    """The targets: value, target, ratio, and met / missed / not measured at the target's size."""
    print("\ntargets (ratio = measured / target; ≤ 1 is met)")
    for name, d in v.items():
        state = {True: "met", False: "MISSED", None: "not at the target's size"}[d["met"]]
        rel = "—" if d["ratio"] is None else f"{d['ratio']:.2f}"
        print(
            f"  {name:<34} {d['value']!s:>8} vs {d['target']!s:<5} ratio {rel:>5}  at {d['measured_at']}: {state}"
        )


# ---------------------------------------------------------------------------------------------- memory
def _children(pid: int) -> list[int]:
    """Every descendant of `pid` (from /proc's parent ids)."""
    parents: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _workers(data: str) -> list[int]:
    """`python -m analysis worker` processes that use the data folder `data` (by their environment)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
            if b"analysis" in cmd and b"worker" in cmd:
                env = (d / "environ").read_bytes()
                if f"TOKLAB_DATA={data}".encode() in env.split(b"\0"):
                    out.append(int(d.name))
        except OSError:
            continue
    return out


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pids: Iterable[int]) -> float:
    """CPU seconds used so far by `pids` and the children they reaped (utime + stime + cutime + cstime)."""
    total = 0
    for pid in pids:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in f[11:15])
        except (OSError, IndexError, ValueError):
            continue
    return total / _TICK


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (every core, /proc/stat's first line less idle and iowait)."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(f) - f[3] - f[4]) / _TICK


class CpuShare:
    """Where a phase's CPU went: the server, its job workers, this script's browser (chromium, Playwright's driver:
    the simulated users' side, which a real deployment runs on the users' own machines) and everything else on the
    machine (other work would make the phase's times worse than the app's)."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.start = self._read()

    def _read(self) -> dict[str, float]:
        m = self.mem
        workers = set(_children(m.pid)) | set(_workers(m.data)) | m.worker_pids
        return {"server": cpu_s([m.pid]), "workers": cpu_s(workers), "browser": cpu_s(_children(os.getpid())),
                "machine": machine_cpu_s()}  # fmt: skip

    def used(self) -> dict[str, float]:
        """CPU seconds since this object was made: server, workers, browser, other, and the wall's core-seconds."""
        now = self._read()
        d = {k: now[k] - self.start[k] for k in now}
        other = d["machine"] - d["server"] - d["workers"] - d["browser"]
        return {k: round(max(v, 0.0), 1) for k, v in
                {"server": d["server"], "workers": d["workers"], "browser": d["browser"], "other": other}.items()}  # fmt: skip


def rss_mb(pid: int) -> float | None:
    """Resident memory of one process in MB (VmRSS), None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


class Memory:
    """Reads the server's RSS and its workers' (children, and `python -m analysis worker` of its data folder) once
    a second in a thread: `now()`, and the peak since `reset_peak()`."""

    def __init__(self, pid: int, data: str) -> None:
        self.pid, self.data = pid, data
        self.peak: dict[str, float] = {"server": 0.0, "workers": 0.0}
        self.worker_pids: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-rss", daemon=True)

    def now(self) -> dict[str, float]:
        """{"server": MB, "workers": MB (all of them together), "n_workers": how many}."""
        kids = set(_children(self.pid)) | set(_workers(self.data))
        self.worker_pids |= kids
        server = rss_mb(self.pid) or 0.0
        workers = sum(rss_mb(k) or 0.0 for k in kids)
        return {"server": round(server, 1), "workers": round(workers, 1), "n_workers": len(kids)}

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            m = self.now()
            for k in ("server", "workers"):
                self.peak[k] = max(self.peak[k], m[k])

    def reset_peak(self) -> None:
        """Start a new peak (a phase's own)."""
        self.peak = {"server": 0.0, "workers": 0.0}

    def start(self) -> Memory:
        """Start reading; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reading."""
        self._stop.set()


# ---------------------------------------------------------------------------------------------- the server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(log: Path) -> Iterator[tuple[str, subprocess.Popen, str]]:
    """A fresh server as `scripts/start.sh` starts it (`scripts/serve.py`, 127.0.0.1, a free port) in a process
    group of its own, with a fresh `TOKLAB_DATA` temporary folder: (URL, process, data folder). The whole group
    is killed after, also on an error or Ctrl-C."""
    data = tempfile.mkdtemp(prefix="toklab-bench-users-")
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKLAB_DATA": data}
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "serve.py"), "--server.headless", "true",
             "--server.address", "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start; its log: {log}")
            time.sleep(0.3)
        yield url, proc, data
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen) -> None:
    """Terminate the server's process group (workers it started included), then kill what is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def stop_workers(pids: set[int]) -> None:
    """Terminate the worker processes the server started that are still there (`scripts/serve.py` starts them in a
    session of their own; they stop with the server, this is the safety net)."""
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"analysis" in cmd and b"worker" in cmd:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)


# ---------------------------------------------------------------------------------------------- the browser side
async def wait_idle(page: Page, timeout_s: float) -> None:
    """The app has finished every run the page asked for and drawn it (`tests/e2e/e2e_support.wait_idle`)."""
    deadline = time.monotonic() + timeout_s
    tracker: RunTracker | None = getattr(page, "_toklab_runs", None)
    while tracker is not None and not tracker.settled():
        if time.monotonic() > deadline:
            raise StepError(f"the app's run did not end within {timeout_s:.0f} s")
        await page.wait_for_timeout(50)
    left = max(1.0, deadline - time.monotonic())
    await page.wait_for_function(APP_IDLE_JS, timeout=left * 1000, polling=100)


async def wait_rerun(page: Page, since: int, timeout_s: float) -> None:
    """After an action that reruns the app (taken after `since = mark(page)`): its request sent, its run ended."""
    tracker: RunTracker | None = getattr(page, "_toklab_runs", None)
    deadline = time.monotonic() + timeout_s
    while tracker is not None and tracker.requested <= since:
        if time.monotonic() > deadline:
            raise StepError(f"the app was not asked to rerun within {timeout_s:.0f} s")
        await page.wait_for_timeout(50)
    await wait_idle(page, max(1.0, deadline - time.monotonic()))


def mark(page: Page) -> int:
    """Where the page's run tracker is now (for `wait_rerun`)."""
    tracker: RunTracker | None = getattr(page, "_toklab_runs", None)
    return tracker.seq if tracker is not None else -1


async def new_page(ctx: BrowserContext) -> Page:
    """A tab whose websocket messages are followed by a `RunTracker`."""
    page = await ctx.new_page()
    tracker = RunTracker()
    page.on("websocket", tracker.attach)
    page._toklab_runs = tracker  # noqa: SLF001 - a bench-side attribute on the Page
    return page


async def check_no_error(page: Page) -> None:
    """Raise `StepError` with the page's text when it shows an exception or an error box."""
    boxes = page.locator(APP_ERROR)
    if await boxes.count():
        text = await boxes.first.inner_text(timeout=5_000)
        raise StepError(f"the page shows an error: {text}")


def workspace_url(page: Page, base: str, path: str, **params: str) -> str:
    """`base + path` with this tab's workspace (`?ws=`) and `params`: a new tab of the same workspace."""
    ws = re.search(r"[?&]ws=([^&]+)", page.url)
    query = {**params, **({"ws": ws.group(1)} if ws else {})}
    return base + path + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


@dataclass
class User:
    """One simulated user: a browser context of its own and its tab, and how long a step may take."""

    name: str
    ctx: BrowserContext
    page: Page
    base: str
    timeout_s: float
    assets: Path
    model_lines: int
    counter: int = 0
    #: the user's number in its phase (makes its model job's inputs its own)
    index: int = 0
    #: a step that times only its own part (the rest is set-up) puts it here under the step's name
    timings: dict[str, float] = field(default_factory=dict)

    async def idle(self, timeout_s: float | None = None) -> None:
        """Wait for the app to be idle (at most the step's time limit)."""
        await wait_idle(self.page, timeout_s or self.timeout_s)

    async def act(self, action: Callable[[], Awaitable[Any]]) -> None:
        """Run `action` (a click, a fill) and wait for the rerun it starts."""
        since = mark(self.page)
        await action()
        await wait_rerun(self.page, since, self.timeout_s)

    async def nav(self, group: str, title: str) -> None:
        """Switch page through the top bar (its group's menu, then the page's item): one session, no reload."""
        page = self.page
        await self.idle()
        if (
            urlparse(page.url).path.strip("/") == NAV_PATHS[title]
        ):  # already there: a click would rerun nothing
            return
        await (
            page.locator('[data-testid="stTopNav"] [data-testid="stTopNavSection"]')
            .filter(has_text=group)
            .first.click()
        )
        item = page.get_by_role("menuitem", name=title)
        await item.first.wait_for(timeout=30_000)
        await self.act(lambda: item.first.click())
        await page.locator('[data-testid="stMain"] h1').first.wait_for(timeout=self.timeout_s * 1000)

    async def choose(self, box_text: str, option: str, scope: str = '[data-testid="stMain"]') -> None:
        """Pick `option` in the selectbox whose label holds `box_text`."""
        page = self.page
        box = page.locator(scope).locator('[data-testid="stSelectbox"]').filter(has_text=box_text).first
        await self.idle()
        item = page.get_by_role("option", name=option, exact=True)
        for attempt in range(5):
            # a click can land while a rerun redraws the box (its list does not open, or closes at once): open
            # it again, as the browser tests' `choose` does
            await box.click()
            try:
                await item.wait_for(timeout=6_000)
                break
            except PlaywrightTimeout:
                if attempt == 4:
                    raise
                await self.idle()
        if await item.get_attribute("aria-selected") == "true":
            await page.keyboard.press("Escape")
            return
        await self.act(lambda: item.click())


# -- the steps: each waits for what the user would see, within the step's time limit
async def home(u: User) -> None:
    """A new tab opens the app (a new session and a new workspace)."""
    await u.page.goto(u.base, timeout=u.timeout_s * 1000)
    await u.idle()


async def playground_switch(u: User) -> None:
    """Home → Playground through the top bar."""
    await u.nav("Look inside", "Playground")
    await u.page.locator(".tl-spans").first.wait_for(timeout=u.timeout_s * 1000)
    await u.idle()


async def playground_redraw(u: User) -> None:
    """Type a new text, commit it (Ctrl+Enter) and wait until every tokenizer's tokens show it."""
    u.counter += 1
    box = u.page.get_by_label("Text", exact=True)
    await box.fill(TYPED.format(k=u.counter))
    await box.press("Control+Enter")
    await u.page.wait_for_function(SPANS_DRAWN_JS, arg=f"Benchmarkword{u.counter}q", polling=100,
                                   timeout=u.timeout_s * 1000)  # fmt: skip
    await u.idle()


async def add_example(u: User) -> None:
    """The sidebar's "Add an example" → gpt2 → Add, until its entry is in the library."""
    side = '[data-testid="stSidebar"]'
    await u.choose("Add an example", EXAMPLE, scope=side)
    await u.idle()
    await u.act(lambda: u.page.locator(side).get_by_role("button", name="Add", exact=True).click())
    entry = (
        u.page.locator(side)
        .locator('[data-testid="stMarkdownContainer"] strong')
        .get_by_text(EXAMPLE, exact=True)
    )
    await entry.first.wait_for(timeout=u.timeout_s * 1000)


async def inspect_switch(u: User) -> None:
    """Playground → Load & inspect through the top bar."""
    await u.nav("Look inside", "Load & inspect")


#: The uploaded tokenizer's name in the library (typed into "Name in the library").
UPLOAD_NAME = "bench-upload"


async def upload(u: User) -> None:
    """Load & inspect's Upload tab: give it a tokenizer.json, "Add upload to library", until it is listed."""
    page = u.page
    data = (u.assets / "tokenizer.json").read_bytes()
    await u.idle()
    tab = page.get_by_role("tab", name="Upload")
    if not await tab.is_visible():  # the "Load a tokenizer" box is folded once the library holds two
        await page.locator('[data-testid="stExpander"] summary').filter(has_text="Load a tokenizer").click()
    await tab.click()
    drop = page.locator('[data-testid="stMain"] [data-testid="stFileUploaderDropzoneInput"]')
    file = {"name": "tokenizer.json", "mimeType": "application/json", "buffer": data}
    await u.act(lambda: drop.set_input_files(files=[file]))
    name = page.locator('[data-testid="stTextInput"]').filter(has_text="Name in the library").locator("input")
    await name.fill(UPLOAD_NAME)
    await u.act(lambda: name.press("Enter"))
    await u.act(lambda: page.get_by_role("button", name="Add upload to library").click())
    side = page.locator('[data-testid="stSidebar"] [data-testid="stMarkdownContainer"] strong')
    await side.get_by_text(UPLOAD_NAME, exact=True).first.wait_for(timeout=u.timeout_s * 1000)


async def compression_switch(u: User) -> None:
    """Load & inspect → Compression through the top bar."""
    await u.nav("Measure", "Compression")


async def compression_setup(u: User) -> None:
    """Add 10 languages to the page's 10 (typed into the list), untimed: the step times Compute."""
    page = u.page
    box = (
        page.locator('[data-testid="stMain"] [data-testid="stMultiSelect"]').filter(has_text="eng_Latn").first
    )
    for code in MORE_LANGS:
        await u.idle()
        field_ = box.locator("input")
        await field_.click()
        await field_.fill(code)
        await page.get_by_role("option", name=re.compile(rf"^{code}")).first.wait_for(timeout=30_000)
        await u.act(lambda: page.keyboard.press("Enter"))
    await page.keyboard.press("Escape")
    want = f"× {PAGE_LANGS + len(MORE_LANGS)} language(s)"
    await page.get_by_text(want, exact=False).first.wait_for(timeout=u.timeout_s * 1000)


async def compression(u: User) -> None:
    """Compute on 20 languages → the result line (tokenizers × languages on FLORES)."""
    page = u.page
    await u.idle()
    await page.get_by_role("button", name="Compute").click()
    done = page.get_by_text(re.compile(r"^\d+ tokenizer\(s\) × \d+ language\(s\) on"))
    await done.first.wait_for(timeout=u.timeout_s * 1000)
    await u.idle()


async def inspect(u: User) -> None:
    """Load & inspect on the uploaded tokenizer: switch there (it opens on the upload), its summary drawn."""
    await u.nav("Look inside", "Load & inspect")
    # the page opens on the tokenizer added last (the upload): its source line names the uploaded file
    await u.page.get_by_text("upload:tokenizer.json", exact=True).first.wait_for(timeout=u.timeout_s * 1000)
    await u.page.get_by_text("Vocabulary (incl. added)").first.wait_for(timeout=u.timeout_s * 1000)
    await u.idle()


# -- the model-side job: pluggable (the page that starts it and what it shows when done)
async def extend_train(u: User) -> None:
    """Extend on SmolLM2-135M-Instruct (a new tab of this workspace, `?t=`), Estonian, default text: Train →
    its results."""
    page = u.page
    await page.goto(workspace_url(page, u.base, "/extend", t=f"example:{MODEL_TOKENIZER}"),
                    timeout=u.timeout_s * 1000)  # fmt: skip
    await u.idle()
    await u.act(lambda: page.get_by_role("button", name="Train", exact=True).click())
    await page.get_by_role("tab", name="Export").wait_for(timeout=u.timeout_s * 1000)


async def extend_model_check(u: User) -> None:
    """Export tab → build the tokenizer → the fetched SmolLM2 as its model → lines per language → "Check the
    model" → its result (the JSON download) or an error. Time: from the click to the result."""
    page = u.page
    await page.get_by_role("tab", name="Export").click()
    await u.act(lambda: page.get_by_role("button", name="Build the extended tokenizer").click())
    await page.get_by_role("button", name="Download zip (Hugging Face folder)").wait_for(
        timeout=u.timeout_s * 1000
    )
    await u.choose("Model of this tokenizer", MODEL_LABEL)
    await u.idle()
    # once the run has ended: a rerun's stale copy of the section is then gone (strict locators see one field)
    lines = page.get_by_label("Lines per language").last
    await lines.wait_for(timeout=u.timeout_s * 1000)
    # one more line per user: the queue runs identical jobs (same inputs) once, and each user's job should run
    want = str(u.model_lines + u.index)
    if await lines.input_value() != want:
        await lines.fill(want)
        await u.act(lambda: lines.press("Enter"))
    await u.idle()
    t0 = time.monotonic()
    await page.get_by_role("button", name="Check the model").click()
    result = page.get_by_role("button", name="Download model_check.json").or_(page.locator(APP_ERROR))
    await result.first.wait_for(timeout=u.timeout_s * 1000)
    await check_no_error(page)
    u.timings["model_job"] = time.monotonic() - t0


#: --model-step: the steps of the model-side job, (name, function); a function may time its own part by setting
#: `u.timings[name]` (the rest of it is set-up), else the whole call is timed.
MODEL_STEPS: dict[str, list[tuple[str, Callable[[User], Awaitable[None]]]]] = {
    "extend-check": [("model_train", extend_train), ("model_job", extend_model_check)],
    "none": [],
}
STEPS: dict[str, Callable[[User], Awaitable[None]]] = {
    "home": home, "playground_switch": playground_switch, "playground_redraw": playground_redraw,
    "add_example": add_example, "inspect_switch": inspect_switch, "upload": upload,
    "compression_switch": compression_switch, "compression": compression, "inspect": inspect,
}  # fmt: skip
#: Untimed set-up run before a step (its failures count as the step's).
SETUP = {"compression": compression_setup}


async def run_steps(u: User, steps: list[tuple[str, Callable[[User], Awaitable[None]]]], tally: Tally,
                    redraws: int = 1) -> bool:  # fmt: skip
    """Run `steps` in order, each within the step limit: its time into `tally`, or its error (and the rest
    skipped). True when every step ended well."""
    names = [n for n, _ in steps]
    for i, (name, fn) in enumerate(steps):
        for _ in range(redraws if name == "playground_redraw" else 1):
            try:
                if name in SETUP:
                    await asyncio.wait_for(SETUP[name](u), u.timeout_s)
                u.timings = {}
                t0 = time.monotonic()
                await asyncio.wait_for(fn(u), u.timeout_s)
                dt = u.timings.get(name, time.monotonic() - t0)
                await check_no_error(u.page)
                tally.add(name, dt)
                if VERBOSE:
                    print(f"    {u.name} {name} {dt:.2f} s", flush=True)
            except Exception as e:  # noqa: BLE001 - every failure is a counted error
                msg = (
                    f"timed out after {u.timeout_s:.0f} s"
                    if isinstance(e, TimeoutError)
                    else f"{type(e).__name__}: {e}"
                )
                tally.error(name, u.name, msg.splitlines()[0] if "Call log" in msg else msg)
                tally.skip(names[i + 1 :])
                if VERBOSE:
                    print(f"    {u.name} {name} ERROR {tally.errors[-1]['message']}", flush=True)
                return False
    return True


def journey_steps(model: str) -> list[tuple[str, Callable[[User], Awaitable[None]]]]:
    """The whole journey: the light and upload steps, Compression, Load & inspect, then the model job."""
    return [(n, STEPS[n]) for n in JOURNEY] + MODEL_STEPS[model]


@contextlib.asynccontextmanager
async def user(browser: Browser, name: str, base: str, args: argparse.Namespace):
    """A simulated user in a new browser context; the context is closed after, whatever happened."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.set_default_timeout(args.step_timeout * 1000)
    try:
        page = await new_page(ctx)
        yield User(name, ctx, page, base, args.step_timeout, Path(args.assets) / "tokenizers" / args.upload,
                   args.model_lines, index=int(re.sub(r"\D", "", name) or 0))  # fmt: skip
    finally:
        with contextlib.suppress(Exception):
            await ctx.close()


# ---------------------------------------------------------------------------------------------- protocol users
#: A protocol-level user's steps are counted under their own names (the server's side of a step, without drawing).
PROTO = "proto:"


@dataclass
class ProtoUser:
    """A simulated user without a browser (`_st_protocol.ProtocolUser`): its session, and a counter for its texts."""

    name: str
    base: str
    timeout_s: float
    session: ProtocolUser | None = None
    counter: int = 0

    async def home(self) -> None:
        """A new tab opens the app: a new session (and workspace); the previous one is closed."""
        if self.session is not None:
            await self.session.close()
        self.session = ProtocolUser(self.base, self.timeout_s)
        await self.session.open()

    async def switch(self, path: str) -> None:
        """A click in the top bar: the page at `path`."""
        assert self.session is not None
        await self.session.switch(path)

    async def redraw(self) -> None:
        """Type a new Playground text and wait for the run that draws its tokens."""
        assert self.session is not None
        self.counter += 1
        await self.session.set_text(
            "pg-text", TYPED.format(k=self.counter), marker=f"Benchmarkword{self.counter}q"
        )

    async def close(self) -> None:
        """Close the tab."""
        if self.session is not None:
            await self.session.close()
            self.session = None


def proto_light_journey(redraws: int) -> list[tuple[str, Callable[[ProtoUser], Awaitable[None]]]]:
    """A protocol user's journey: the light steps of the browser journey (no upload, no job: those need a browser
    or a worker, and the browser users run them)."""
    return [
        ("home", lambda u: u.home()),
        ("playground_switch", lambda u: u.switch("playground")),
        *[("playground_redraw", lambda u: u.redraw())] * redraws,
        ("inspect_switch", lambda u: u.switch("inspect")),
        ("compression_switch", lambda u: u.switch("compression")),
        ("playground_switch", lambda u: u.switch("playground")),
    ]


async def run_proto_steps(u: ProtoUser, steps: list[tuple[str, Callable[[ProtoUser], Awaitable[None]]]],
                          tally: Tally, prefix: str = PROTO) -> bool:  # fmt: skip
    """:func:`run_steps` for a protocol user: each step within the limit, its time or its error (the rest
    skipped) into `tally` under `prefix` + its name."""
    names = [prefix + n for n, _ in steps]
    for i, (name, fn) in enumerate(steps):
        try:
            t0 = time.monotonic()
            await asyncio.wait_for(fn(u), u.timeout_s)
            tally.add(prefix + name, time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - every failure is a counted error
            msg = (
                f"timed out after {u.timeout_s:.0f} s"
                if isinstance(e, TimeoutError)
                else f"{type(e).__name__}: {e}"
            )
            tally.error(prefix + name, u.name, msg)
            tally.skip(names[i + 1 :])
            if VERBOSE:
                print(f"    {u.name} {name} ERROR {tally.errors[-1]['message']}", flush=True)
            return False
    return True


async def journey_phase(browser: Browser, base: str, n: int, args: argparse.Namespace) -> Tally:
    """N users at once, each through the whole journey in a new context."""
    tally = Tally()

    protocol = min(args.protocol_users, n - 1) if n > 1 else 0

    done = asyncio.Event()

    async def one(i: int) -> None:
        async with user(browser, f"u{i}", base, args) as u:
            await run_steps(u, journey_steps(args.model_step), tally, args.redraws)

    async def browsers() -> None:
        try:
            await asyncio.gather(*(one(i) for i in range(n - protocol)))
        finally:
            done.set()

    async def proto(i: int) -> None:
        """The light journey again and again (a new tab each time) while any browser user is on its way: the N
        users are all there until the last browser journey ends."""
        u = ProtoUser(f"p{i}", base, args.step_timeout)
        try:
            while await run_proto_steps(u, proto_light_journey(args.redraws), tally) and not done.is_set():
                pass
        finally:
            await u.close()

    await asyncio.gather(browsers(), *(proto(i) for i in range(protocol)))
    return tally


async def mixed_phase(browser: Browser, base: str, n: int, heavy: int, args: argparse.Namespace) -> Tally:
    """`heavy` users run Compression on 20 languages and the model job while N light users loop Home, a
    Playground redraw and a page switch until every heavy job has ended. Heavy steps keep their names; light
    ones are timed as `home`, `playground_redraw`, `page_switch`."""
    tally, light = Tally(), Tally()
    done = asyncio.Event()
    heavy_steps = [(n_, STEPS[n_]) for n_ in ("home", "playground_switch", "playground_redraw", "add_example",
                                              "inspect_switch", "upload", "compression_switch", "compression")]  # fmt: skip

    async def heavy_user(i: int) -> None:
        async with user(browser, f"h{i}", base, args) as u:
            await run_steps(u, heavy_steps + MODEL_STEPS[args.model_step], tally)

    async def light_user(i: int) -> None:
        async with user(browser, f"l{i}", base, args) as u:
            if not await run_steps(u, [("home", home), ("playground_switch", playground_switch)], light):
                return
            switch = [("page_switch", lambda u: u.nav("Look inside", "Load & inspect")),
                      ("page_switch", lambda u: u.nav("Look inside", "Playground"))]  # fmt: skip
            while not done.is_set():
                if not await run_steps(u, [("playground_redraw", playground_redraw), *switch], light):
                    return
                if not await run_steps(u, [("home", home), ("page_switch", playground_switch)], light):
                    return

    async def proto_light_user(i: int) -> None:
        u = ProtoUser(f"l{i}", base, args.step_timeout)
        try:
            start = [("home", lambda u: u.home()), ("page_switch", lambda u: u.switch("playground"))]
            if not await run_proto_steps(u, start, light, prefix=""):
                return
            loop = [("playground_redraw", lambda u: u.redraw()), ("page_switch", lambda u: u.switch("inspect")),
                    ("page_switch", lambda u: u.switch("playground"))]  # fmt: skip
            while not done.is_set():
                if not await run_proto_steps(u, loop, light, prefix=""):
                    return
                if not await run_proto_steps(u, start, light, prefix=""):
                    return
        finally:
            await u.close()

    async def heavies() -> None:
        try:
            await asyncio.gather(*(heavy_user(i) for i in range(heavy)))
        finally:
            done.set()

    light_one = proto_light_user if args.light_clients == "protocol" else light_user
    await asyncio.gather(heavies(), *(light_one(i) for i in range(n)))
    for s, xs in light.times.items():
        for x in xs:
            tally.add(f"light:{s}", x)
    tally.errors += [{**e, "step": f"light:{e['step']}"} for e in light.errors]
    for s, k in light.skipped.items():
        tally.skipped[f"light:{s}"] = tally.skipped.get(f"light:{s}", 0) + k
    return tally


def light_times(t: Tally) -> list[float]:
    """The mixed phase's light steps together."""
    return [x for s, xs in t.times.items() if s.startswith("light:") for x in xs]


async def soak_phase(browser: Browser, base: str, args: argparse.Namespace, mem: Memory) -> dict[str, Any]:
    """`--soak-users` users repeat the journey (no model job), each round in a new context, for `--soak`
    minutes; RSS after the first and the last round (every user's), and its growth."""
    tally = Tally()
    end = time.monotonic() + args.soak * 60
    steps = [(n, STEPS[n]) for n in JOURNEY]
    rounds = [0] * args.soak_users
    first: dict[str, float] | None = None
    first_done = asyncio.Event()
    arrived = 0

    async def one(i: int) -> None:
        nonlocal first, arrived
        while True:
            async with user(browser, f"s{i}", base, args) as u:
                await run_steps(u, steps, tally)
            rounds[i] += 1
            if rounds[i] == 1:
                arrived += 1
                if arrived == args.soak_users:
                    first = mem.now()
                    first_done.set()
                await first_done.wait()
            if time.monotonic() >= end:
                return

    t0 = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(args.soak_users)))
    last = mem.now()
    growth = ratio((last["server"] + last["workers"]) - (first["server"] + first["workers"]),
                   first["server"] + first["workers"]) if first else None  # fmt: skip
    return {"users": args.soak_users, "minutes": args.soak, "ran_s": round(time.monotonic() - t0, 1),
            "rounds": sum(rounds), "errors": len(tally.errors), "rss_after_first_round_mb": first,
            "rss_at_end_mb": last, "growth": _r(growth, 4), "steps": tally.rows(),
            "error_messages": error_summary(tally.errors)}  # fmt: skip


async def measure(
    base: str,
    mem: Memory,
    args: argparse.Namespace,
    sizes: list[int],
    checkpoint: Callable[[dict[str, Any]], None] = lambda _: None,
) -> dict[str, Any]:
    """Every phase at every size, then the soak: the figures. `checkpoint` gets the figures so far after each
    phase (an interrupted or failed run keeps what it measured)."""
    phases: list[dict[str, Any]] = []
    base_p95: dict[str, float] = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
        try:
            # warm-up: one user opens Home (a fresh server's first run, the browser's caches) — not counted
            async with user(browser, "warm", base, args) as u:
                await home(u)
            idle_rss = mem.now()
            print(f"server up: RSS {idle_rss['server']:.0f} MB, workers {idle_rss['workers']:.0f} MB")
            for n in sizes:
                for phase in args.phases:
                    heavy = min(args.heavy, n)
                    mem.reset_peak()
                    before = mem.now()
                    cpu = CpuShare(mem)
                    t0 = time.monotonic()
                    if phase == "journey":
                        tally = await journey_phase(browser, base, n, args)
                    else:
                        tally = await mixed_phase(browser, base, n, heavy, args)
                    wall = time.monotonic() - t0
                    used = cpu.used()
                    after = mem.now()
                    settled = None
                    if args.settle:
                        await asyncio.sleep(args.settle)  # a measured wait: does memory come back?
                        settled = mem.now()
                    rows = tally.rows()
                    if not base_p95 and phase == "journey":
                        base_p95 = {r["step"]: r["p95_s"] for r in rows if r["p95_s"]}
                    lt = light_times(tally) if phase == "mixed" else tally.light()
                    clients = (
                        {"light_clients": args.light_clients} if phase == "mixed"
                        else {"protocol_users": min(args.protocol_users, n - 1) if n > 1 else 0}
                    )  # fmt: skip
                    doc = {"phase": phase, "users": n, "heavy": heavy if phase == "mixed" else 0, **clients,
                           "wall_s": round(wall, 1), "errors": len(tally.errors), "skipped": sum(tally.skipped.values()),
                           "light_p50_s": _r(percentile(lt, 50)), "light_p95_s": _r(percentile(lt, 95)),
                           "rss_before_mb": before, "rss_peak_mb": dict(mem.peak), "rss_after_close_mb": after,
                           "rss_after_settle_mb": settled, "cpu_s": used, "steps": rows,
                           "error_messages": error_summary(tally.errors)}  # fmt: skip
                    phases.append(doc)
                    title = f"N = {n}, {phase}" + (f" ({heavy} heavy jobs)" if phase == "mixed" else "")
                    print_table(f"{title}: {wall:.0f} s, {doc['errors']} errors, light p95 {doc['light_p95_s']} s, "
                                f"RSS {before['server']:.0f} → peak {mem.peak['server']:.0f} → {after['server']:.0f} MB "
                                f"(workers peak {mem.peak['workers']:.0f} MB)", rows, base_p95)  # fmt: skip
                    print(
                        f"  CPU-s: server {used['server']}, workers {used['workers']}, browser (the users' "
                        f"side) {used['browser']}, other processes {used['other']} of {(os.cpu_count() or 1) * wall:.0f} core-s"
                    )
                    for e in doc["error_messages"]:
                        print(f"    error ×{e['count']} in {e['step']}: {e['message']}")
                    checkpoint(
                        {"idle_rss_mb": idle_rss, "phases": phases, "soak": None, "baseline_p95_s": base_p95}
                    )
            soak = None
            if args.soak:
                soak = await soak_phase(browser, base, args, mem)
                print_table(f"soak: {soak['users']} users, {soak['minutes']} min, {soak['rounds']} rounds, "
                            f"{soak['errors']} errors, RSS growth {soak['growth']}", soak["steps"], base_p95)  # fmt: skip
        finally:
            with contextlib.suppress(Exception):
                await browser.close()
    return {"idle_rss_mb": idle_rss, "phases": phases, "soak": soak, "baseline_p95_s": base_p95}


def sizes_of(text: str) -> list[int]:
    """`--users`: comma-separated positive user counts."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of user counts: {text!r}") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"user counts must be ≥ 1: {text!r}")
    return out


def parser() -> argparse.ArgumentParser:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--users",
        type=sizes_of,
        default=sizes_of("1,4,8,16,20"),
        help="user counts (the first is the baseline)",
    )
    ap.add_argument(
        "--phases",
        type=lambda s: [p for p in s.split(",") if p],
        default=["journey", "mixed"],
        help="journey, mixed or both (default)",
    )
    ap.add_argument(
        "--heavy", type=int, default=TARGET_HEAVY_JOBS, help="heavy jobs in the mixed phase (at most N)"
    )
    ap.add_argument("--soak", type=float, default=TARGET_SOAK_MINUTES, help="soak minutes (0: none)")
    ap.add_argument("--soak-users", type=int, default=TARGET_SOAK_USERS)
    ap.add_argument("--model-step", choices=sorted(MODEL_STEPS), default="extend-check")
    ap.add_argument(
        "--model-lines", type=int, default=20, help="held-out lines per language of the model check"
    )
    ap.add_argument(
        "--upload",
        default="mistral-7b-v0.1",
        help="the tokenizer uploaded (a folder of $TOKLAB_ASSETS/tokenizers)",
    )
    ap.add_argument("--redraws", type=int, default=3, help="Playground redraws per journey")
    ap.add_argument(
        "--step-timeout",
        type=float,
        default=900.0,
        help="seconds a step may take before it counts as an error",
    )
    ap.add_argument(
        "--settle", type=float, default=0.0, help="seconds to wait after each phase before reading RSS again"
    )
    ap.add_argument(
        "--assets", default=os.environ.get("TOKLAB_ASSETS", str(ROOT.parent / "shared" / "assets"))
    )
    ap.add_argument(
        "--light-clients",
        choices=("browser", "protocol"),
        default="browser",
        help="the mixed phase's light users: browser contexts, or protocol-level clients (bench/_st_protocol.py)",
    )
    ap.add_argument(
        "--protocol-users",
        type=int,
        default=0,
        help="of each journey phase's N users, this many are protocol-level clients on the light journey (at "
        "least one user stays a browser)",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help="print every step as it ends")
    ap.add_argument("--variant", default=None, help="a name for this run's conditions: results file suffix")
    return ap  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Start the server, run the phases and the soak, print the tables and the targets, write the results."""
    ap = parser()
    args = ap.parse_args(argv)
    global VERBOSE
    VERBOSE = args.verbose
    bad = [p for p in args.phases if p not in ("journey", "mixed")]
    if bad or not args.phases:
        ap.error(f"--phases: journey and/or mixed, not {bad or args.phases}")
    if not (Path(args.assets) / "tokenizers" / args.upload / "tokenizer.json").is_file():
        ap.error(f"no tokenizer.json under {args.assets}/tokenizers/{args.upload} (set TOKLAB_ASSETS)")
    if not Path(CHROMIUM).exists():
        ap.error(f"{CHROMIUM} not found: install Debian chromium")
    run = Run(__file__, variant=variant_from(ap, args, ignore=("assets", "step_timeout", "verbose")),
              argv=[sys.argv[0], *(sys.argv[1:] if argv is None else argv)])  # fmt: skip
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    log = Path(tempfile.gettempdir()) / f"bench-users-server-{os.getpid()}.log"
    print(f"bench_users: users {args.users}, phases {args.phases}, soak {args.soak} min, model step "
          f"{args.model_step}; server log {log}")  # fmt: skip
    targets = {"errors_at_20_users": "0", "light_p95_at_8_users_4_heavy_s": f"<= {TARGET_LIGHT_P95_S}",
               "soak_10_min_4_users_rss_growth": f"<= {TARGET_SOAK_GROWTH:.0%}"}  # fmt: skip

    def partial(figures: dict[str, Any]) -> None:  # what was measured so far, marked incomplete
        run.write({"complete": False, **figures}, targets=targets, met=None)

    try:
        with serve(log) as (base, proc, data):
            mem = Memory(proc.pid, data).start()
            try:
                figures = asyncio.run(measure(base, mem, args, args.users, partial))
            finally:
                mem.stop()
                stop_workers(mem.worker_pids)
    except KeyboardInterrupt:
        print("\ninterrupted: the browser and the server were stopped; any phase that ended is in the results "
              "file (complete: false)", file=sys.stderr)  # fmt: skip
        return 130
    v = verdicts(figures["phases"], figures["soak"])
    print_verdicts(v)
    figures = {"complete": True, **figures, "targets_measured": v}
    figures["clients"] = {"light_clients": args.light_clients, "protocol_users": args.protocol_users}
    met_values = [d["met"] for d in v.values()]
    met = None if None in met_values or not met_values else all(met_values)
    run.write(figures, targets=targets, met=met)
    return 0


if __name__ == "__main__":
    sys.exit(main())
