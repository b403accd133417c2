"""Source-attributed code records: one source file with its repository and language, read once.

The shared code corpus (`<assets>/corpora/code`, one `<language>.jsonl.gz` per language and a `heldout/` split)
and any JSON-lines files with the same fields. :func:`read_code` reads whole files in this process; the corpus
jobs read the same records shard by shard (:func:`analysis.texts.shards.iter_records`). Both keep records through
:func:`capped_records`, so a per-repository cap means the same records on either path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.core import paths
from analysis.core.inputs import check_not_special, json_records
from analysis.errors import DataError


@dataclass(frozen=True)
class CodeRecord:
    """One source file with its attribution."""

    repo: str
    language: str
    path: str
    text: str


def code_dir() -> Path:
    """The shared source-attributed code corpus (`<assets>/corpora/code`)."""
    return paths.code_corpus()


def code_languages(heldout: bool = False, folder: str | Path | None = None) -> list[str]:
    """Languages with a `<language>.jsonl.gz` file in the code corpus (or its `heldout/` split)."""
    d = Path(folder) if folder else code_dir()
    if heldout:
        d = d / "heldout"
    if not d.is_dir():
        return []
    return sorted(p.name.split(".")[0] for p in d.glob("*.jsonl*"))


def capped_records(
    rows: Iterable[Any],
    stem: str,
    *,
    max_files_per_repo: int | None = None,
    max_bytes_per_repo: int | None = None,
) -> Iterator[CodeRecord]:
    """The records of one file's rows (JSON objects) that have a `text`, `repo` and `language` defaulting to the
    file stem; per repository and language the first `max_files_per_repo` files / `max_bytes_per_repo` UTF-8
    bytes are kept (always at least one file per repository)."""
    n_files: Counter = Counter()
    n_bytes: Counter = Counter()
    for rec in rows:
        text = rec.get("text") if isinstance(rec, dict) else None
        if not isinstance(text, str) or not text:
            continue
        repo = str(rec.get("repo") or stem)
        lang = str(rec.get("language") or stem)
        key = (repo, lang)
        size = len(text.encode("utf-8"))
        if max_files_per_repo is not None and n_files[key] >= max_files_per_repo:
            continue
        if max_bytes_per_repo is not None and n_bytes[key] + size > max_bytes_per_repo and n_bytes[key]:
            continue
        n_files[key] += 1
        n_bytes[key] += size
        yield CodeRecord(repo, lang, str(rec.get("path") or ""), text)


def _code_files(
    paths: Sequence[str | Path] | str | Path | None, languages: Iterable[str] | None, heldout: bool
) -> list[Path]:
    if paths is None or isinstance(paths, (str, Path)):
        paths = [paths or code_dir()]
    files: list[Path] = []
    for p in map(check_not_special, paths):
        if p.is_dir():
            d = p / "heldout" if heldout else p
            files += [check_not_special(f) for f in sorted(d.glob("*.jsonl.gz")) + sorted(d.glob("*.jsonl"))]
        elif p.is_file():
            files.append(p)
        else:
            raise DataError(f"code corpus {p} not found")
    if languages is not None:
        want = set(languages)
        files = [f for f in files if f.name.split(".")[0] in want]
    if not files:
        raise DataError("no code corpus files (*.jsonl or *.jsonl.gz) selected")
    return files


def read_code(
    paths: Sequence[str | Path] | str | Path | None = None,
    *,
    languages: Iterable[str] | None = None,
    heldout: bool = False,
    max_files_per_repo: int | None = None,
    max_bytes_per_repo: int | None = None,
) -> list[CodeRecord]:
    """Source-attributed records from JSON-lines files or folders (default: the shared code corpus).

    Records need a `text`; `repo` and `language` default to the file stem. Per repository and language the first
    `max_files_per_repo` files / `max_bytes_per_repo` UTF-8 bytes are kept (a balanced slice of many repositories).
    """
    out: list[CodeRecord] = []
    for f in _code_files(paths, languages, heldout):
        try:
            with open(f, "rb") as fh:  # bounded lines, strict UTF-8, clear JSON errors (analysis.core.inputs)
                rows = (rec for _, rec in json_records(fh, f.name))
                out += capped_records(
                    rows,
                    f.name.split(".")[0],
                    max_files_per_repo=max_files_per_repo,
                    max_bytes_per_repo=max_bytes_per_repo,
                )
        except (OSError, EOFError, UnicodeDecodeError) as e:
            raise DataError(f"cannot read {f}: {e}") from None
    if not out:
        raise DataError("the selected code corpus has no records with text")
    return out
