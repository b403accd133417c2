"""Start the app's server with a warm process: the first request of a fresh server should cost what a new session
costs, not the process's first imports.

`streamlit run` imports nothing of the app until the first browser request arrives, so that request pays for
pandas, Plotly, the engine and the embedded default tokenizer (≈ 1.5 s on two cores). Streamlit runs the app's
script in this same process, so importing those modules here and loading the default tokenizer through the app's
own shared cache, before the server opens its port, makes them ready for the first request: the server answers once
it is ready. Arguments are `streamlit run`'s options.

It also starts the job workers (`python -m analysis worker`, ``TOKLAB_WORKERS`` processes, default 1; 0 starts
none, for a lab whose workers run elsewhere): heavy work runs there, never in the server (docs/jobs.md). They stop
with the server: at its exit, and — after a ``kill -9`` — by themselves once they see it gone (``--parent``).

    .venv/bin/python scripts/serve.py --server.port 8501
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli

ROOT = Path(__file__).resolve().parent.parent

#: What every first view imports: the frame's and the shared widgets' modules (the pages import from these).
WARM_MODULES = ("pandas", "plotly.graph_objects", "plotly.express", "analysis", "ui.library", "ui.loaders",
                "ui.gallery", "ui.errors", "ui.links", "ui.spans", "ui.language_charts", "ui.pickers")  # fmt: skip


def warm() -> None:
    """Import the modules every first view needs, load the embedded default into the app's shared cache and read
    the stored example gallery once (its folder hashes are then known to the first request)."""
    if str(ROOT) not in sys.path:  # run as a script, Python puts scripts/ first, not the repository
        sys.path.insert(0, str(ROOT))
    # outside a script run Streamlit warns once per cached call that it is in "bare mode": expected here
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
    try:
        for name in WARM_MODULES:
            importlib.import_module(name)
        importlib.import_module("ui.loaders").load_default()
        importlib.import_module("analysis.views.gallery").read_gallery()  # hashes the example folders once
    except Exception as e:  # noqa: BLE001 (a failed warm-up costs the first request its time; the app says why)
        print(f"[serve] warm-up skipped: {e}", file=sys.stderr)


def leave_legacy_pages_mode() -> None:
    """Start the server with app.py's `st.navigation` in charge from the first request.

    Streamlit enters its legacy "pages/ folder" mode when the class flag is still unset as the server starts (the
    entry script has a `pages/` sibling); a fresh server's first deep link then ran `pages/<page>.py` alone.
    `ui/__init__.py` hands such a run over to app.py when it first imports `ui` — but `warm()` has already imported
    `ui` here, outside any run, so that hand-over would never happen again in this process (the page ran without
    its frame, its sidebar library and its error boundary). Setting the flag to False first, as `st.navigation`
    itself does, means the mode is never entered, and the first request needs no hand-over rerun."""
    PagesManager.uses_pages_directory = False


def warm_pages() -> None:
    """Start computing the embedded default's first-view analyses in the background (`ui.warmup`): the server
    opens its port at once, and the first visitor of Load & inspect, Token health or Token reuse reads them."""
    try:
        warmup = importlib.import_module("ui.warmup")
        warmup.warm_in_background(importlib.import_module("ui.loaders").load_default)
    except Exception as e:  # noqa: BLE001 (as in warm())
        print(f"[serve] background warm-up skipped: {e}", file=sys.stderr)


#: Set by :func:`use_system_allocator` when it chose the server's allocator (so the workers are not given it).
OWN_PYTHONMALLOC = "TOKLAB_SERVER_PYTHONMALLOC"


def use_system_allocator() -> None:
    """Run the server on the C library's malloc for Python's small objects (``PYTHONMALLOC=malloc``): this process
    is started again with it, once, unless the operator set ``PYTHONMALLOC``. pymalloc keeps a 1 MiB arena while
    any object in it lives, so the few objects that outlive a session pin arenas the session filled; glibc gives
    free pages back (`release_memory`'s trim) at 4 KiB. Measured in one process (8 sessions × 3 uploads, all
    closed, arenas capped, the mmap threshold fixed): RSS left +11 % over the baseline with pymalloc, +4 % with
    malloc, for 13–22 % more CPU on that work. The job workers keep pymalloc (:func:`start_workers`)."""
    if os.environ.get("PYTHONMALLOC"):
        return
    os.environ["PYTHONMALLOC"] = "malloc"
    os.environ[OWN_PYTHONMALLOC] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)


def start_workers() -> subprocess.Popen | None:
    """Start the job workers beside this server (None when ``TOKLAB_WORKERS`` is 0); stopped when it exits. They
    keep Python's own allocator unless the operator chose another."""
    if os.environ.get("TOKLAB_WORKERS", "").strip() == "0":
        return None
    env = dict(os.environ)
    if env.pop(OWN_PYTHONMALLOC, None):
        env.pop("PYTHONMALLOC", None)
    proc = subprocess.Popen([sys.executable, "-m", "analysis", "worker", "--parent", str(os.getpid())], cwd=ROOT,
                            env=env, start_new_session=True)  # fmt: skip
    atexit.register(stop_workers, proc)
    return proc


def stop_workers(proc: subprocess.Popen) -> None:
    """Stop the workers (their running jobs become "interrupted", with "run again" in the app)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def upload_option(argv: list[str]) -> list[str]:
    """`--server.maxUploadSize` for a model upload cap (``TOKLAB_MODEL_UPLOAD_MB``) above .streamlit/config.toml's
    1024 MB, unless the command line sets it: [] otherwise."""
    if any(a.startswith("--server.maxUploadSize") for a in argv):
        return []
    mb = -(-importlib.import_module("analysis.core.paths").model_upload_bytes() // (1024 * 1024))
    return ["--server.maxUploadSize", str(mb)] if mb > 1024 else []


def main(argv: list[str]) -> None:
    """Warm the process, start the job workers and the pages' background warm-up, then `streamlit run
    toklab_server.py` (app.py in an `st.App` that also serves the workspace file route, `ui/file_route.py`) with these
    options. glibc's malloc arenas are capped first (`analysis.core.memory.limit_malloc_arenas`) and its mmap
    threshold fixed (`fix_mmap_threshold`): a server's RSS then stays flat as sessions come and go, and comes back
    down when they close."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    memory = importlib.import_module("analysis.core.memory")
    memory.limit_malloc_arenas()
    memory.fix_mmap_threshold()
    warm()
    leave_legacy_pages_mode()
    start_workers()
    warm_pages()
    sys.argv = [
        "streamlit",
        "run",
        str(ROOT / "toklab_server.py"),
        *argv,
        *upload_option(argv),
    ]  # app.py, plus the file route
    cli.main()


if __name__ == "__main__":
    use_system_allocator()
    main(sys.argv[1:])
