"""`python -m analysis workspaces list|size|prune [--idle-days N] [--dry-run] [--json]`: the operator's view of the
browser workspaces kept under ``TOKLAB_DATA`` (:mod:`analysis.core.workspace`). ``prune`` also removes the job
records (:mod:`analysis.jobs.queue`) of every workspace no longer there, and the unpacked model folders
(``<data>/models/<sha256>/``) whose upload no workspace holds any more. ``size`` counts the unpacked folders on
disk; a workspace's size counts the unpacked folders of its uploads."""

from __future__ import annotations

import argparse
import math
import time

from analysis.core.inputs import human_size
from analysis.core.workspace import WorkspaceInfo, default_store
from analysis.errors import DataError
from analysis.jobs.queue import default_jobs

from ._common import print_json

NAME = "workspaces"
HELP = "list the browser workspaces, show their size on disk, or remove the idle ones (prune)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `workspaces`."""
    sub = p.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="every workspace: key prefix, created, last used, items, size")
    size = sub.add_parser(
        "size", help="how many workspaces, items and bytes, and the data folder's size on disk"
    )
    prune = sub.add_parser("prune", help="remove the workspaces unused for longer than the idle limit")
    prune.add_argument("--idle-days", type=float, default=None,
                       help="remove workspaces unused for more than this many days "
                            "(default TOKLAB_WORKSPACE_IDLE_DAYS, 90)")  # fmt: skip
    prune.add_argument("--dry-run", action="store_true", help="list what would go, remove nothing")
    for q in (listing, size, prune):
        q.add_argument("--json", action="store_true", help="print one JSON object")


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(t))


def _table(rows: list[WorkspaceInfo]) -> None:
    print(f"{'key':<12}  {'created (UTC)':<16}  {'last used (UTC)':<16}  {'items':>5}  {'size':>9}")
    for w in rows:
        print(
            f"{w.key:<12}  {_when(w.created):<16}  {_when(w.used):<16}  {w.items:>5,}  {human_size(w.bytes):>9}"
        )


def run(args: argparse.Namespace) -> int:
    """List, size or prune the workspaces of the configured data folder."""
    if getattr(args, "idle_days", None) is not None and not (
        math.isfinite(args.idle_days) and args.idle_days >= 0
    ):
        raise DataError(f"--idle-days must be a number of days ≥ 0, not {args.idle_days}")
    store = default_store()
    if args.action == "prune":
        # unpacked model folders whose upload is gone, which prune removes (those of the workspaces it removes go
        # with them, counted in their size)
        folders = store.orphan_unpacked()
        gone = store.prune(args.idle_days, dry_run=args.dry_run)
        folder_bytes = sum(b for _, b in folders)
        jobs = 0 if args.dry_run else default_jobs().drop_orphans()  # the records of the workspaces gone
        if args.json:
            print_json({"removed": [w.to_json() for w in gone], "jobs_removed": jobs,
                        "unpacked_removed": len(folders), "unpacked_bytes": folder_bytes,
                        "dry_run": args.dry_run})  # fmt: skip
            return 0
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb} {len(gone)} workspace(s), {human_size(sum(w.bytes for w in gone))}"
              + f"; {len(folders)} unpacked model folder(s) without an upload, {human_size(folder_bytes)}"
              + ("" if args.dry_run else f"; {jobs} job record(s)"))  # fmt: skip
        if gone:
            _table(gone)
        return 0
    rows = store.list()
    if args.action == "size":
        doc = {"data_folder": str(store.root), "workspaces": len(rows), "items": sum(w.items for w in rows),
               "charged_bytes": sum(w.bytes for w in rows), "disk_bytes": store.total_bytes()}  # fmt: skip
        if args.json:
            print_json(doc)
        else:
            print(f"{doc['workspaces']:,} workspace(s), {doc['items']:,} items, {human_size(doc['charged_bytes'])} "
                  f"charged; {human_size(doc['disk_bytes'])} on disk in {store.root}")  # fmt: skip
        return 0
    if args.json:
        print_json({"workspaces": [w.to_json() for w in rows]})
    else:
        _table(rows)
    return 0
