"""What a pruning run hands over: its JSON report (the schema `python -m analysis prune` writes as
`prune_report.json`), the tokenizer folder (optionally with the model's remapped embeddings) and a zip of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.adapt.embeddings import RemapReport, remap_model
from analysis.core.outputs import atomic_folder, json_ready, strict_json
from analysis.errors import DataError
from analysis.tokenizer.export import folder_files, write_files, zip_bytes, zip_files
from analysis.tokenizer.tokenizer import LoadedTokenizer

from . import PruneResult, unreachable_ids

#: How the model's new embedding rows are initialised when a prune adds ids back (prune-then-extend): the CLI's
#: ``--init`` choices and the Prune page's options.
MODEL_INITS = ("fvt", "mean", "random")

REPORT_NAME = "prune_report.json"
#: folders larger than this are not zipped in memory for a download
MAX_ZIP_BYTES = 1_000_000_000


@dataclass
class PruneReport:
    """The report of one pruning run — what `python -m analysis prune --json` prints, the Prune page downloads
    and both write as `prune_report.json` (:meth:`to_json`, one schema).

    `unreachable_before` / `unreachable` are None when the STT was skipped; `corpus` describes how the token
    frequencies were counted (executor, files, bytes, seconds) when the order needed them; `model` is the
    model remap (:class:`analysis.adapt.embeddings.RemapReport`, without its pieces sample) when a model followed.
    """

    tokenizer: str
    order: str
    removed: int
    added: int
    original_vocab_size: int
    vocab_size: int
    merges_removed: int
    merges: int
    unreachable_before: int | None
    unreachable: int | None
    removed_sample: list[str]
    id_map: dict[int, int]
    out: str | None = None
    corpus: dict[str, Any] | None = None
    model: dict[str, Any] | None = None
    #: the robustness before → after (:meth:`analysis.measure.robustness.RobustnessDelta.to_json`), when measured
    robustness: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object (id map keys as strings)."""
        out: dict[str, Any] = {
            k: getattr(self, k)
            for k in (
                "tokenizer",
                "order",
                "removed",
                "added",
                "original_vocab_size",
                "vocab_size",
                "merges_removed",
                "merges",
                "unreachable_before",
                "unreachable",
                "removed_sample",
            )
        }
        if self.corpus is not None:
            out["corpus"] = self.corpus
        if self.out is not None:
            out["out"] = self.out
        out["id_map"] = {str(k): v for k, v in self.id_map.items()}
        if self.model is not None:
            out["model"] = self.model
        if self.robustness is not None:
            out["robustness"] = self.robustness
        return out


def prune_report(
    tok: LoadedTokenizer,
    order: str,
    res: PruneResult,
    *,
    final: LoadedTokenizer | None = None,
    id_map: Mapping[int, int] | None = None,
    added: Sequence[str] = (),
    stt: bool = False,
    out: str | os.PathLike | None = None,
    corpus: dict[str, Any] | None = None,
) -> PruneReport:
    """The report of one pruning run (`final`/`id_map`/`added` when the pruned tokenizer was extended again).

    With `stt`, the STT-unreachable counts before and after are measured (seconds on a large vocabulary);
    otherwise they are None, as with the CLI's `--no-stt`. `out` is the folder the run is written to, if any;
    `corpus` the summary of the corpus run the order's frequencies came from.
    """
    final = final or res.tokenizer
    id_map = res.id_map if id_map is None else id_map
    return PruneReport(
        tokenizer=tok.name,
        order=order,
        removed=len(res.removed),
        added=len(added),
        original_vocab_size=tok.vocab_size,
        vocab_size=final.vocab_size,
        merges_removed=res.merges_removed,
        merges=len(final.merges),
        unreachable_before=len(unreachable_ids(tok)) if stt else None,
        unreachable=len(unreachable_ids(final)) if stt else None,
        removed_sample=[tok.readable(tok.id_to_token[i]) for i in res.removed[:20]],
        id_map=dict(id_map),
        out=str(Path(out).resolve()) if out is not None else None,
        corpus=corpus,
    )


def pruned_zip(res: PruneResult, report: PruneReport, folder: str) -> bytes:
    """The pruned tokenizer's Hugging Face folder (with the report) as zip bytes."""
    return zip_bytes(
        res.tokenizer,
        report.to_json(),
        folder=folder,
        base_config=res.tokenizer.config,
        report_name=REPORT_NAME,
    )


@dataclass
class WrittenExport:
    """A folder an export wrote: where it is, the files it wrote (relative paths) and the model remap, if any."""

    folder: Path
    files: list[str]
    remap: RemapReport | None = None


def write_pruned(
    tok: LoadedTokenizer,
    res: PruneResult,
    out_dir: str | os.PathLike,
    report: PruneReport,
    *,
    model: str | None = None,
    init: str = "fvt",
    replace: bool = False,
    final: LoadedTokenizer | None = None,
) -> WrittenExport:
    """Write the pruned tokenizer folder to `out_dir` and, given a model, the model with its embeddings and LM
    head remapped to the new ids (new rows: `init`); `final` is the tokenizer written when the pruned one was
    extended again (the id map is the report's).

    The report's `model` is filled in by the remap, and `prune_report.json` equals ``report.to_json()``.
    Atomic (:func:`analysis.core.outputs.atomic_folder`): the folder is built beside `out_dir` and renamed into place
    when complete; a non-empty `out_dir` is refused unless `replace`. Raises DataError when it cannot be written.
    """
    new = final or res.tokenizer
    with atomic_folder(out_dir, replace=replace) as tmp:
        write_files(tmp, folder_files(new, report.to_json(), base_config=new.config, report_name=REPORT_NAME))
        remap = None
        if model:
            remap = remap_model(model, tok, new, report.id_map, tmp, init=init)
            report.model = {k: v for k, v in remap.to_json().items() if k != "pieces_sample"}
            write_files(tmp, {REPORT_NAME: strict_json(json_ready(report.to_json())).encode("utf-8")})
        files = sorted(f.relative_to(tmp).as_posix() for f in tmp.rglob("*") if f.is_file())
    return WrittenExport(Path(out_dir), files, remap)


def folder_size(folder: str | os.PathLike, files: Sequence[str] | None = None) -> int:
    """Total bytes of the files under a folder (only `files`, relative paths, when given)."""
    root = Path(folder)
    paths = [root / f for f in files] if files is not None else [f for f in root.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in paths if f.is_file() and not f.is_symlink())


def zip_folder(
    folder: str | os.PathLike, files: Sequence[str] | None = None, max_bytes: int = MAX_ZIP_BYTES
) -> bytes:
    """A folder (tokenizer + model) as zip bytes, its files under the folder's name; DataError above `max_bytes`.

    With `files` (the manifest an export returned), only those files go into the zip — never anything else that
    appeared in the folder since — and each must still be a regular file inside it (not a link).
    """
    root = Path(folder).resolve()
    if files is None:
        chosen = [f for f in root.rglob("*") if f.is_file() and not f.is_symlink()]
    else:
        chosen = []
        for rel in files:
            f = root / rel
            if f.is_symlink() or not f.is_file() or not f.resolve().is_relative_to(root):
                raise DataError(f"{rel} is no longer a file of the exported folder {root}: not zipped")
            chosen.append(f)
    total = sum(f.stat().st_size for f in chosen)
    if total > max_bytes:
        raise DataError(f"{root} holds {total / 1e6:.0f} MB: too large to zip in memory")
    return zip_files(((f.relative_to(root).as_posix(), f.read_bytes()) for f in chosen), root.name)
