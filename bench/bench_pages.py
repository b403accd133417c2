"""First-render time of every page on the embedded default, in a real browser, and the Playground's update time.

A real server (`streamlit run app.py`, 127.0.0.1) and Debian chromium through Playwright. For each page of the
navigation, a new browser session opens the page's URL; the time runs from the request until the page is idle: its
title and the sidebar's library are drawn, the script has finished (`data-test-script-state="notRunning"`), the
"Running…" widget is gone, nothing is stale and no element still shows a skeleton while its code loads (checked on
every animation frame).
Pages that compute on a button (Compression, Under-trained tokens, Extend…) are timed to their first view, before
the button. The first pass (`cold`) is the first visit of each page on a fresh server (imports, first loads and
disk-cache reads included); the second pass (`warm`) visits them again in new sessions (the median of `--visits`
visits). Both open each page in a new browser profile (a first-time visitor: Streamlit's front-end code is
fetched, parsed and compiled again); the third (`new tab`) opens it in a new tab of one profile that has loaded
the app before (a returning user: a new session, the front-end code from the browser's caches).

`warm − Home` is a page's own cost: Home computes nothing, so its time is the floor of any first view in a new
browser context (loading and starting Streamlit's front end, the websocket, the frame).

The Playground's update time: type a new text into the text area of a session with three tokenizers (the embedded
default, gpt2, llama-3.1), commit it, and wait until the new tokens are drawn; the median of several edits.

    python bench/bench_pages.py [--repeat 5] [--visits 1] [--json bench/out/pages.json] [--pages "Prune,Token health"]

`--pages` visits only the named pages, after the PRELUDE pages (Home and Load & inspect, which a walk of every page
meets first and which pay the shared start-up: imports, the embedded default's load); `--no-playground` skips the
update timing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from _results import Run, variant_from
from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROME_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
]
PLAYGROUND = "/playground?t=embedded:&t=example:gpt2&t=example:llama-3.1"
#: visited before the pages chosen with --pages, as a walk of every page does: the first visitor's Home and the
#: first page that loads the embedded default (their start-up costs are not charged to the chosen pages)
PRELUDE = ("Home", "Load & inspect")
#: a first view's target (issue 22), fresh server and warm, in a new browser profile
TARGET_S = 2.0


def server_fast_path() -> dict[str, bool]:
    """Whether the server can take uvicorn's fast path (requirements.txt): `httptools` parses HTTP instead of
    pure-Python h11, and Streamlit runs its event loop on `uvloop`. Without them every first view in a new browser
    is 0.3–0.4 s slower on two cores (serving the front end's files), so the figures say which they were taken with."""
    return {m: importlib.util.find_spec(m) is not None for m in ("httptools", "uvloop")}


def pages() -> list[tuple[str, str]]:
    """(title, url path) of every page, in the navigation's order (read from app.py)."""
    src = (ROOT / "app.py").read_text(encoding="utf-8")
    return [
        (t, "/" if u == "home" else f"/{u}")
        for t, u in re.findall(r'_page\("pages/\w+\.py", "([^"]+)", "\w+", "([\w-]+)"', src)
    ]


ROOT_TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(ROOT_TESTS), str(ROOT_TESTS / "e2e")]
from e2e_support import _IDLE_JS as APP_IDLE_JS  # noqa: E402 - the browser tests' one "run drawn" condition
from e2e_support import NO_SKELETON_JS  # noqa: E402 - and their "no placeholder left" condition

#: A page's first view drawn: the browser tests' idle condition (connected, script finished, "Running…" gone,
#: nothing stale, the sidebar's library drawn), plus no element still waiting for its front-end code (Streamlit
#: shows a skeleton until a lazily loaded component — a data grid, a code block — has arrived) and a title.
DRAWN_JS = f"""() => ({APP_IDLE_JS})() && ({NO_SKELETON_JS})()
  && !!document.querySelector('[data-testid="stMain"] h1')"""


def idle(page: Page, timeout: int = 600_000) -> None:
    """Wait until the page is drawn (:data:`DRAWN_JS`), checked on every animation frame: `expect()` polls at
    0.1, 0.35, 0.85, 1.85 s … after its start, which rounded a first view of 1.5 s up to 1.85 s."""
    page.wait_for_function(DRAWN_JS, polling="raf", timeout=timeout)


def first_render(browser, url: str) -> float:
    """Seconds from the request to the drawn page (:func:`idle`), in a new browser profile (a new context: no
    HTTP or compiled-code cache, as a first-time visitor's browser) and a new Streamlit session."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    dt = render_in_tab(ctx, url)
    ctx.close()
    return dt


def render_in_tab(ctx, url: str) -> float:
    """Seconds from the request to the drawn page in a new tab of the browser context `ctx` (a new Streamlit
    session; the browser's caches as `ctx` left them)."""
    page = ctx.new_page()
    t0 = time.perf_counter()
    page.goto(url)
    idle(page)
    dt = time.perf_counter() - t0
    page.close()
    return dt


#: every span view holds the word (`n` of them): what "its tokens drawn" means for the Playground benches
SPANS_DRAWN = """([word, n]) => {
  const el = [...document.querySelectorAll('.tl-spans')];
  return el.length === n && el.every((e) => e.innerText.includes(word));
}"""


def wait_drawn(page: Page, js: str, arg=None, timeout: int = 60_000) -> None:
    """Wait for a page condition checked on every animation frame (expect() polls at 100, 250, 500, 1000 ms and
    can report a change up to a second after it was drawn)."""
    page.wait_for_function(js, arg=arg, polling="raf", timeout=timeout)


def playground_updates(browser, base: str, repeat: int) -> list[float]:
    """Seconds from committing a new text to its tokens being drawn, three tokenizers, `repeat` edits."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.goto(base + PLAYGROUND)
    expect(page.locator(".tl-spans")).to_have_count(3, timeout=600_000)
    idle(page)
    box = page.get_by_label("Text")
    times = []
    for k in range(repeat):
        word = f"Benchmarkword{k}x"
        box.fill(f"Tokenizers split {word} differently; tere hommikust, 東京 {k}.")
        t0 = time.perf_counter()
        box.press("Control+Enter")
        wait_drawn(page, SPANS_DRAWN, [f"{k}x", 3])
        times.append(time.perf_counter() - t0)
        idle(page)
    ctx.close()
    return times


def serve(warm: bool = True) -> tuple[subprocess.Popen, str]:
    """A fresh server on a free port, started as `scripts/start.sh` starts it (`scripts/serve.py`, a warm process) or,
    with `warm=False`, by plain `streamlit run`; returns the process and its URL once /_stcore/health answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, *([str(ROOT / "scripts" / "serve.py")] if warm else ["-m", "streamlit", "run", str(ROOT / "app.py")]),
         "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("the server did not start")


def main() -> None:
    """Time every page cold and warm, then the Playground's updates; print a table, optionally write JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="Playground edits to time")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument(
        "--variant", default=None, help="a name for this run's conditions (e.g. hog): results file suffix"
    )
    ap.add_argument(
        "--pages", default="", help="comma-separated page titles to time (after the PRELUDE); default all"
    )
    ap.add_argument("--visits", type=int, default=1, help="warm visits per page; the median is reported")
    ap.add_argument("--no-playground", action="store_true", help="skip the Playground's update timing")
    args = ap.parse_args()
    chosen = [p.strip() for p in args.pages.split(",") if p.strip()]
    run = Run(__file__, variant=variant_from(ap, args))
    visit = [(t, p) for t, p in pages() if not chosen or t in chosen or t in PRELUDE]
    if chosen and len(visit) != len(set(chosen) | set(PRELUDE)):
        raise SystemExit(f"unknown page in --pages; pages: {', '.join(t for t, _ in pages())}")
    proc, base = serve()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"), args=CHROME_ARGS
            )
            rows = [{"page": t, "path": p, "cold_s": first_render(browser, base + p)} for t, p in visit]
            for r in rows:
                r["warm_s"] = statistics.median(
                    first_render(browser, base + r["path"]) for _ in range(args.visits)
                )
            # a returning visitor: one browser profile that has loaded the app once, a new tab (a new session)
            # per visit, so Streamlit's front-end code comes from the browser's caches
            ctx = browser.new_context(viewport={"width": 1280, "height": 900})
            render_in_tab(ctx, base + "/")
            for r in rows:
                r["tab_s"] = statistics.median(
                    render_in_tab(ctx, base + r["path"]) for _ in range(args.visits)
                )
            ctx.close()
            updates = [] if args.no_playground else playground_updates(browser, base, args.repeat)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(15)
    home = next((r["warm_s"] for r in rows if r["page"] == "Home"), None)
    print(f"{'page':<24} {'cold (s)':>9} {'warm (s)':>9} {'warm − Home (s)':>16} {'new tab (s)':>12}")
    for r in rows:
        if home is not None:  # the page's own cost: Home computes nothing, so its time is the browser's floor
            r["over_home_s"] = r["warm_s"] - home
        over = f"{r['over_home_s']:>+16.2f}" if home is not None else ""
        print(f"{r['page']:<24} {r['cold_s']:>9.2f} {r['warm_s']:>9.2f} {over} {r['tab_s']:>12.2f}")
    print(
        "cold: a fresh server; warm: the server warm; both in a new browser profile (a first-time visitor)."
    )
    print(
        "new tab: the server warm, a new session in a browser that has loaded the app before (a returning user)."
    )
    over = [
        f"{r['page']} ({max(r['cold_s'], r['warm_s']):.2f} s)"
        for r in rows
        if max(r["cold_s"], r["warm_s"]) > TARGET_S
    ]
    print(f"target: every page's first view ≤ {TARGET_S:g} s, fresh server (cold) and warm: "
          + ("OK" if not over else f"MISSED by {len(over)} of {len(rows)}: {', '.join(over)}"))  # fmt: skip
    fast = server_fast_path()
    print(
        "server: " + ", ".join(f"{m} {'yes' if ok else 'NO (slower first views)'}" for m, ok in fast.items())
    )
    if updates:
        print(f"Playground update (3 tokenizers): median {statistics.median(updates):.2f} s, max {max(updates):.2f} s "
              f"over {len(updates)} edits")  # fmt: skip
    pages_s = [{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for r in rows]
    figures = {"pages": pages_s, "visits": args.visits, "server": fast,
               "playground_update_s": {"median": round(statistics.median(updates), 3), "max": round(max(updates), 3),
                                       "edits": len(updates)} if updates else None}  # fmt: skip
    run.write(figures, targets={"every page, cold and warm": f"<= {TARGET_S:g} s", "playground_update_s": "<= 1"},
              met=not over and (not updates or statistics.median(updates) <= 1))  # fmt: skip
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps({"pages": rows, "playground_update_s": updates, "server": fast}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
