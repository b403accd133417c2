"""The unpacked folders of a workspace store's files (``<data>/models/<sha256>/``: an uploaded model unpacked so the
loaders read it), as :class:`analysis.core.workspace.WorkspaceStore` keeps them: part of the file's storage, charged
with it, removed with it, and pruned once no item names the file.

The helpers here touch the file system only; which files are named is the store's to say.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Iterable
from pathlib import Path

#: The folder inside the data folder that holds the unpacked folders of stored files (``models/<sha256>/``).
UNPACKED = "models"
#: An unpacked folder (or an unpacking's staging folder) younger than this is never pruned as an orphan: its
#: upload may be on its way into the store.
GRACE_SECONDS = 3600.0
DIGEST = re.compile(r"[0-9a-f]{64}")


def folder_bytes(folder: Path, skip: set[tuple[int, int]]) -> int:
    """Bytes of the regular files under `folder` (links not followed), each file (device, inode) once, none of
    those in `skip` (which grows by the files counted)."""
    total = 0
    for dirpath, _dirs, names in os.walk(folder):
        for n in names:
            try:
                st = os.lstat(os.path.join(dirpath, n))
            except OSError:
                continue
            ident = (st.st_dev, st.st_ino)
            if stat.S_ISREG(st.st_mode) and ident not in skip:
                skip.add(ident)
                total += st.st_size
    return total


def unpacked_bytes(folder: Path, linked: Iterable[Path | None]) -> int:
    """Bytes of unpacked `folder` (0 when there is none), not counting its files that are hard links of one of
    the files `linked` (the stored file itself: a ``.gguf`` is linked into its folder, not copied)."""
    if not folder.is_dir():
        return 0
    same = set()
    for f in linked:
        try:
            if f is not None:
                st = f.stat()
                same.add((st.st_dev, st.st_ino))
        except OSError:
            pass
    return folder_bytes(folder, same)


def remove_tree(folder: Path) -> None:
    """Remove a folder: renamed aside first (one step, so no reader ever sees half of it under its name), then
    deleted; a rename or a removal that fails leaves it for the next prune."""
    if not folder.is_dir():
        return
    aside = folder.with_name(f".gone-{folder.name}-{secrets.token_hex(4)}")
    try:
        folder.rename(aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def orphans(root: Path, named: set[str]) -> list[tuple[Path, int]]:
    """The folders under `root` (the store's ``models``) older than :data:`GRACE_SECONDS` that nothing needs: an
    unpacked folder whose file is not in `named` (the SHA-256s of the files items or shares name), an unpacking's
    staging folder (``.<digest>.<pid>.partial``) or a removal cut short (``.gone-…``); each with its bytes."""
    if not root.is_dir():
        return []
    old = time.time() - GRACE_SECONDS
    out = []
    for p in sorted(root.iterdir()):
        if not p.is_dir() or p.is_symlink():
            continue
        if DIGEST.fullmatch(p.name):
            orphan = p.name not in named
        else:
            orphan = p.name.startswith(".") and (p.name.endswith(".partial") or p.name.startswith(".gone-"))
        try:
            if orphan and p.stat().st_mtime < old:
                out.append((p, folder_bytes(p, set())))
        except OSError:
            continue
    return out
