"""The embedded default's per-tokenizer analyses, computed once in the background when the server starts.

Most pages open on the embedded default, and their first view needs an analysis of its whole vocabulary that does
not depend on any widget: the vocabulary table (Load & inspect), the Self-Tokenization Test table (Token health),
the Unicode-block classes and shared symbols (Token reuse), Prune's default order, plus the modules the pages import. Each is cached in this process by
content (`analysis.core.cache.memoize`, single flight), so computing them in a background thread once the server
has started means the first visitor of each page reads them instead of waiting for them; a visitor who arrives
while one is still being computed waits for that same computation, never a second one.

`scripts/serve.py` starts :func:`warm_in_background`; nothing here runs inside a script run.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable

from analysis.bpe import stt_report
from analysis.methods import pruning, reuse
from analysis.texts.flores import available_codes
from analysis.tokenizer.tokenizer import LoadedTokenizer
from analysis.tokenizer.vocab_table import vocab_table
from analysis.views.vocab_views import stt_table

#: Modules the pages import beyond what every first view needs (the frame's own are imported before the server
#: starts): importing them here takes their first-import time off the first visit of each page.
PAGE_MODULES = ("analysis.methods.pruning", "analysis.methods.extension", "analysis.methods.dynamic",
                "analysis.methods.sabpe", "analysis.methods.undertrained", "analysis.views.export_check",
                "ui.export_check", "ui.model_check", "ui.corpus_jobs", "ui.trees", "ui.progress")  # fmt: skip


def import_page_modules() -> None:
    """Import :data:`PAGE_MODULES` (raises ImportError naming every module that failed)."""
    failed = []
    for name in PAGE_MODULES:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 (the page that imports it will show the error)
            failed.append(f"{name}: {e}")
    if failed:
        raise ImportError("; ".join(failed))


def prune_first_view_order(tok: LoadedTokenizer) -> pruning.PruneOrder | None:
    """The order Prune's first view shows for `tok` (the page's defaults, :data:`pruning.FIRST_VIEW_ORDER` on the
    FLORES mix), through the disk store, so it is in this process's memory when the page asks; None without
    FLORES."""
    langs = [c for c in pruning.FIRST_VIEW_LANGUAGES if c in available_codes()]
    if not langs:
        return None
    texts, _ = pruning.flores_mix(langs, pruning.FIRST_VIEW_TRAIN_LINES)
    return pruning.stored_order(tok, pruning.FIRST_VIEW_ORDER, texts, counts=None,
                                allowed_scripts=pruning.FIRST_VIEW_SCRIPTS, scores=None)  # fmt: skip


def first_view_work(tok: LoadedTokenizer) -> list[tuple[str, Callable[[], object]]]:
    """(what, call) for each per-tokenizer analysis a page's first view reads, in the order visitors meet them:
    Load & inspect's vocabulary table first, then the pages' modules, then the rest."""
    work: list[tuple[str, Callable[[], object]]] = [
        ("id lookup", lambda: tok.id_to_token),
        ("vocabulary table", lambda: vocab_table(tok)),
        ("page modules", import_page_modules),
    ]
    if tok.model_type == "BPE":
        work.append(("Self-Tokenization Test", lambda: (stt_report(tok), stt_table(tok))))
        work.append(("pruning order", lambda: prune_first_view_order(tok)))
    work.append(("Unicode-block classes", lambda: reuse.classify_vocab(tok, reuse.DEFAULT_RULES)))
    work.append(("shared symbols", lambda: reuse.all_shared_symbol_ids(tok)))
    return work


def warm_first_views(tok: LoadedTokenizer) -> list[str]:
    """Run :func:`first_view_work` for `tok`; returns what failed (a failure only costs that page's first visit its
    time: the page computes it and shows its own error)."""
    failed = []
    for what, call in first_view_work(tok):
        try:
            call()
        except Exception as e:  # noqa: BLE001 (see the docstring)
            failed.append(f"{what}: {e}")
    return failed


def warm_in_background(load: Callable[[], LoadedTokenizer]) -> threading.Thread:
    """Start a daemon thread that loads the tokenizer with `load` (the app's shared loader) and warms its first
    views; failures are reported on stderr, once."""

    def run() -> None:
        try:
            failed = warm_first_views(load())
        except Exception as e:  # noqa: BLE001 (the first page that loads it shows the error)
            failed = [f"load: {e}"]
        for line in failed:
            print(f"[serve] background warm-up: {line}", file=sys.stderr)

    thread = threading.Thread(target=run, name="toklab-warm-first-views", daemon=True)
    thread.start()
    return thread
