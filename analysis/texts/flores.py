"""FLORES-200 / FLORES+ data: find it, read it, name its languages.

Why one file (about 600 lines): the one FLORES access: five source layouts, the language table, the
train/dev/held-out split and the download share one reader and one error vocabulary.

Supported sources (:func:`open_flores`):

* the official FLORES-200 layout — a folder holding ``<split>/<code>.<split>`` files (the folder itself, its
  ``<split>/`` child or a ``flores200_dataset/`` child), or the official ``flores200_dataset.tar.gz``
  (extracted once into the on-disk cache);
* FLORES+ jsonl — ``<split>/<code>.jsonl`` records with a ``text`` field (newer hub revisions);
* FLORES+ parquet — a folder of ``<split>/<code>.parquet`` files (the ``openlanguagedata/flores_plus`` hub
  layout) or parquet files with ``iso_639_3``/``iso_15924``/``text`` columns. Needs pyarrow; without it,
  parquet sources raise a clear :class:`DataError`;
* on demand, when online: :func:`download_official` (the official archive, with a progress callback) and
  :func:`download_flores_plus` (the hub dataset through ``huggingface_hub``).

This module is the one FLORES access of every page and command. Without an explicit path the data comes from
``$TOKLAB_FLORES``, else ``flores200`` in the shared assets (``$TOKLAB_ASSETS``) when present, else the last copy
downloaded into the cache (:func:`default_flores_path`). :func:`lines`, :func:`split_lines` and
:func:`available_codes` read that default dataset. Codes are FLORES-200 file names (``est_Latn``, ``zho_Hans``, ``pes_Arab``); FLORES+
names (``ekk_Latn``, ``cmn_Hans``/``cmn_Hani``, ``fas_Arab``) are accepted as aliases both ways.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tarfile
import threading
import urllib.request
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tqdm.auto import tqdm

from analysis.core.cache import memoize
from analysis.core.inputs import bounded_lines, check_not_special
from analysis.core.paths import BUNDLED, cache_dir, flores_setting, max_text_bytes, shared_flores
from analysis.core.progress import Progress, report
from analysis.errors import DataError

LANGUAGES_TSV = BUNDLED / "flores_languages.tsv"
DEFAULT_SPLIT = "devtest"
#: FLORES lines used for training when a FLORES language is the training text; the rest is held out.
FLORES_TRAIN_LINES = 800
SPLITS = ("devtest", "dev")
ENV_VAR = "TOKLAB_FLORES"
#: The longest FLORES line read (its sentences are under 1,000 characters): a longer one is refused with its line
#: number — a 10 MB "sentence" would otherwise be trained on and measured for minutes.
MAX_SENTENCE_CHARS = 20_000
OFFICIAL_URL = "https://dl.fbaipublicfiles.com/nllb/flores200_dataset.tar.gz"
FLORES_PLUS_REPO = "openlanguagedata/flores_plus"
ENGLISH = "eng_Latn"
#: what :func:`extract_archive` unpacks at most (far above the official archive: two text files per language)
MAX_ARCHIVE_BYTES = 2 << 30
MAX_ARCHIVE_MEMBERS = 100_000

#: FLORES+ / requested code → FLORES-200 file name (the inverse is used when a FLORES+ source lacks a code).
ALIASES: dict[str, str] = {
    "ekk_Latn": "est_Latn",
    "cmn_Hani": "zho_Hans",
    "cmn_Hans": "zho_Hans",
    "cmn_Hant": "zho_Hant",
    "fas_Arab": "pes_Arab",
    "zho_Hani": "zho_Hans",
}
_CODE_RE = re.compile(r"^[a-z]{3}_[A-Z][a-z]{3}$")
#: Scripts grouped as in Purason et al., "Teaching Old Tokenizers New Words" (2025), Table 2 (Simplified/Traditional Han count as Hani).
SCRIPT_GROUP = {"Hans": "Hani", "Hant": "Hani"}


# --------------------------------------------------------------------------------------------------
# Language metadata
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Language:
    """One FLORES code with its English name, ISO 15924 script, script name and family."""

    code: str
    name: str
    script: str
    script_name: str
    family: str
    spaceless: bool

    @property
    def script_group(self) -> str:
        """The script as Purason et al. (2025), Table 2 group it (Hans/Hant → Hani)."""
        return SCRIPT_GROUP.get(self.script, self.script)


@lru_cache(maxsize=1)
def languages() -> dict[str, Language]:
    """All 204 FLORES-200 codes → :class:`Language` (from the committed assets/flores_languages.tsv)."""
    out: dict[str, Language] = {}
    header: list[str] | None = None
    for line in LANGUAGES_TSV.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        cells = line.split("\t")
        if header is None:
            header = cells
            continue
        row = dict(zip(header, cells))
        out[row["code"]] = Language(
            code=row["code"],
            name=row["name"],
            script=row["script"],
            script_name=row["script_name"],
            family=row["family"],
            spaceless=row["spaceless"] == "1",
        )
    return out


def language(code: str) -> Language:
    """Metadata of a code (aliases accepted); unknown codes get a best-effort entry (script from the code)."""
    langs = languages()
    c = canonical_code(code)
    if c in langs:
        return langs[c]
    script = code.split("_")[-1] if "_" in code else "?"
    return Language(
        code=code, name=code, script=script, script_name=script, family="Unknown", spaceless=False
    )


def canonical_code(code: str) -> str:
    """The FLORES-200 file name of a code (`ekk_Latn` → `est_Latn`, `cmn_Hani` → `zho_Hans`)."""
    code = code.strip()
    return ALIASES.get(code, code)


def alias_names(code: str) -> list[str]:
    """Every name a FLORES-200 code may have in other releases (itself first)."""
    return [code] + [a for a, c in ALIASES.items() if c == code]


# --------------------------------------------------------------------------------------------------
# Data sets
# --------------------------------------------------------------------------------------------------
def parquet_available() -> bool:
    """True when parquet files can be read (pyarrow is installed)."""
    return importlib.util.find_spec("pyarrow") is not None


class FloresData:
    """One split of FLORES on disk: its codes, lines (cached) and per-language data hashes.

    `files` maps a FLORES-200 code to its text file (`kind == "text"`) or its parquet file and, for
    multi-language parquet files, the row filter (`kind == "parquet"`).
    """

    def __init__(self, root: Path, split: str, kind: str, files: dict[str, tuple[Path, str | None]]) -> None:
        self.root = root
        self.split = split
        self.kind = kind
        self.files = dict(sorted(files.items()))
        self._lines: OrderedDict[str, list[str]] = OrderedDict()
        self._hash: dict[str, str] = {}
        self._lock = threading.Lock()
        self.aliases: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"FloresData(root={str(self.root)!r}, split={self.split!r}, kind={self.kind!r}, n={len(self.files)})"

    @property
    def codes(self) -> list[str]:
        """The FLORES-200 codes present, sorted."""
        return list(self.files)

    def __contains__(self, code: str) -> bool:
        try:
            self.resolve(code)
        except DataError:
            return False
        return True

    def resolve(self, code: str) -> str:
        """The code as stored here (aliases accepted); DataError naming close matches when absent."""
        c = canonical_code(code)
        if c in self.files:
            return c
        c = self.aliases.get(code.strip(), c)
        if c in self.files:
            return c
        if not _CODE_RE.match(code.strip()):
            raise DataError(f"{code!r} is not a FLORES language code (expected e.g. eng_Latn, est_Latn)")
        prefix = code.strip()[:3]
        near = [k for k in self.files if k.startswith(prefix)]
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise DataError(
            f"unknown FLORES language {code!r}: not in the FLORES data at {self.root} "
            f"({len(self.files)} languages){hint}"
        )

    def resolve_many(self, spec: str | list[str] | None) -> list[str]:
        """Codes from `all`, None, a comma-separated string or a list (aliases accepted, duplicates dropped); an
        empty string names no language (DataError), not every one."""
        if spec is None or (isinstance(spec, str) and spec.strip().lower() == "all"):
            return self.codes
        items = spec.split(",") if isinstance(spec, str) else list(spec)
        out: list[str] = []
        for it in items:
            if it.strip():
                c = self.resolve(it)
                if c not in out:
                    out.append(c)
        if not out:
            raise DataError("no languages selected (give 'all' or comma-separated FLORES codes)")
        return out

    def lines(self, code: str) -> list[str]:
        """The sentences of one language (newline-free, in corpus order; cached, at most 256 languages)."""
        c = self.resolve(code)
        with self._lock:
            got = self._lines.get(c)
            if got is not None:
                self._lines.move_to_end(c)
                return got
        lines = self._read(c)
        with self._lock:
            self._lines[c] = lines
            while len(self._lines) > 256:
                self._lines.popitem(last=False)
        return lines

    def _read(self, c: str) -> list[str]:
        path, filt = self.files[c]
        check_not_special(path)  # a FIFO among the language files would block the reader
        try:
            if self.kind == "text":
                return _read_text_lines(path)
            lines = _read_jsonl_lines(path) if self.kind == "jsonl" else _read_parquet_lines(path, filt)
            for i, line in enumerate(lines, 1):
                if len(line) > MAX_SENTENCE_CHARS:
                    raise DataError(_long_sentence(path, i, len(line)))
            return lines
        except OSError as e:
            raise DataError(f"cannot read FLORES file {path}: {e}") from e
        except UnicodeDecodeError as e:
            raise DataError(f"FLORES file {path} is not UTF-8 text: {e}") from e

    def data_hash(self, code: str) -> str:
        """SHA-256 (16 hex) of one language's sentences: the data half of every cache key."""
        c = self.resolve(code)
        h = self._hash.get(c)
        if h is None:
            h = _known_hash(self.files[c])
        if h is None:
            text = "\n".join(self.lines(c)) + "\n"
            h = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
            _remember_hash(self.files[c], h)
        self._hash[c] = h
        return h

    def texts_key(self, codes: Iterable[str]) -> str:
        """``|code:hash`` for each language in order: the data half of a cache key over several languages."""
        return "".join(f"|{code}:{self.data_hash(code)}" for code in codes)


# data hashes remembered on disk by (file, filter, size, mtime): a fresh process answers a cached request
# without reading the texts
_HASH_MEMO: dict[str, str] | None = None
_HASH_LOCK = threading.Lock()


def _file_key(entry: tuple[Path, str | None]) -> str | None:
    path, filt = entry
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{path.resolve()}|{filt or ''}|{st.st_size}|{st.st_mtime_ns}"


def _hash_memo_path() -> Path:
    return flores_cache_dir() / "data-hashes.json"


def _known_hash(entry: tuple[Path, str | None]) -> str | None:
    global _HASH_MEMO
    key = _file_key(entry)
    if key is None:
        return None
    with _HASH_LOCK:
        if _HASH_MEMO is None:
            try:
                _HASH_MEMO = json.loads(_hash_memo_path().read_text(encoding="utf-8"))
                if not isinstance(_HASH_MEMO, dict):
                    _HASH_MEMO = {}
            except (OSError, ValueError):
                _HASH_MEMO = {}
        return _HASH_MEMO.get(key)


def _remember_hash(entry: tuple[Path, str | None], h: str) -> None:
    global _HASH_MEMO
    key = _file_key(entry)
    if key is None:
        return
    with _HASH_LOCK:
        if _HASH_MEMO is None:
            _HASH_MEMO = {}
        _HASH_MEMO[key] = h
        path = _hash_memo_path()
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            tmp.write_text(json.dumps(_HASH_MEMO), encoding="utf-8")
            tmp.replace(path)
        except OSError:
            tmp.unlink(missing_ok=True)


def _long_sentence(path: Path, line: int, chars: int | None = None) -> str:
    size = f"{chars:,} characters" if chars is not None else f"over {MAX_SENTENCE_CHARS:,} characters"
    return (
        f"FLORES file {path.name} line {line} is {size} long: not a FLORES sentence (the longest are under "
        f"1,000; lines over {MAX_SENTENCE_CHARS:,} are refused). Is this folder FLORES-200?"
    )


def _read_text_lines(path: Path) -> list[str]:
    """The non-blank lines of a FLORES text file, read through the bounded line reader (a line longer than
    :data:`MAX_SENTENCE_CHARS` is refused as soon as it is seen, never read whole; the text budget applies)."""
    cap = max_text_bytes()
    out = []
    with open(path, "rb") as fh:
        for line_no, piece, whole in bounded_lines(fh, path.name, [cap], cap, MAX_SENTENCE_CHARS + 1):
            if not whole and len(piece) > MAX_SENTENCE_CHARS:
                raise DataError(_long_sentence(path, line_no))
            line = piece.rstrip("\r\n")
            if line.strip():
                out.append(line)
    return out


def _read_jsonl_lines(path: Path) -> list[str]:
    """The `text` (or `sentence`) field of every record of a FLORES+ jsonl file."""
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise DataError(f"{path}:{i + 1}: not a JSON line ({e})") from e
        text = rec.get("text", rec.get("sentence")) if isinstance(rec, dict) else None
        if not isinstance(text, str):
            raise DataError(f"{path}:{i + 1}: record has no 'text' field")
        if text.strip():
            out.append(text.replace("\n", " "))
    return out


def _read_parquet_lines(path: Path, filt: str | None) -> list[str]:
    if not parquet_available():
        raise DataError(
            "reading FLORES+ parquet files needs pyarrow (pip install pyarrow); it is not installed"
        )
    import pyarrow.parquet as pq  # noqa: PLC0415 - heavy, only for parquet sources

    cols = None if filt is None else ["iso_639_3", "iso_15924", "text"]
    table = pq.read_table(path, columns=cols)
    names = table.column_names
    col = "text" if "text" in names else ("sentence" if "sentence" in names else None)
    if col is None:
        raise DataError(f"{path}: parquet file has no 'text' (or 'sentence') column")
    texts = table.column(col).to_pylist()
    if filt is not None:
        lang, script = filt.split("_")
        keys = zip(table.column("iso_639_3").to_pylist(), table.column("iso_15924").to_pylist())
        texts = [t for t, key in zip(texts, keys) if key == (lang, script)]
    return [str(s).replace("\n", " ") for s in texts if str(s).strip()]


def _text_files(folder: Path, split: str) -> dict[str, tuple[Path, str | None]]:
    out: dict[str, tuple[Path, str | None]] = {}
    for p in folder.glob(f"*.{split}"):
        code = p.name[: -len(split) - 1]
        if _CODE_RE.match(code) and p.is_file():
            out[canonical_code(code)] = (p, None)
    return out


def _parquet_files(folder: Path, split: str) -> dict[str, tuple[Path, str | None]]:
    """Per-language `<code>.parquet` files, or multi-language `<split>*.parquet` files, in one folder."""
    files = sorted(folder.glob("*.parquet"))
    per_code = [p for p in files if _CODE_RE.match(p.stem.split("-")[0])]
    out: dict[str, tuple[Path, str | None]] = {}
    if per_code:
        for p in per_code:
            out[canonical_code(p.stem.split("-")[0])] = (p, None)
        return out
    multi = [p for p in files if p.name.startswith(split)] or (files if folder.name == split else [])
    for p in multi:
        out.update(_parquet_files_multi(p))
    return out


def _find_split_dir(root: Path, split: str) -> tuple[Path, str] | None:
    """The folder holding a split's files, and their kind ("text" or "parquet")."""
    candidates = [root / split, root / "flores200_dataset" / split, root, root / "data"]
    if root.is_dir():
        candidates += [d / split for d in sorted(root.iterdir()) if d.is_dir()]
    for d in candidates:
        if not d.is_dir():
            continue
        if any(d.glob(f"*.{split}")):
            return d, "text"
        if any(d.glob("*.parquet")) and _parquet_files_names_match(d, split):
            return d, "parquet"
        if any(_CODE_RE.match(p.stem) for p in d.glob("*.jsonl")):
            return d, "jsonl"
    return None


def _parquet_files_names_match(d: Path, split: str) -> bool:
    if d.name == split:
        return True
    return any(p.name.startswith(split) for p in d.glob("*.parquet"))


def default_flores_path() -> Path | None:
    """Where FLORES comes from when no path is given: ``$TOKLAB_FLORES``; else ``flores200`` in the shared assets
    when it exists; else the last copy downloaded into the cache (:func:`download_official`,
    :func:`download_flores_plus`); else None."""
    env = flores_setting()
    if env is not None:
        return env
    shared = shared_flores()
    if shared.exists():
        return shared
    try:
        remembered = Path((flores_cache_dir() / "current.txt").read_text(encoding="utf-8").strip())
    except OSError:
        return None
    return remembered if str(remembered) and remembered.exists() else None


def _remember_download(path: Path) -> None:
    """Make a downloaded copy the default for every page and command (when nothing else is configured)."""
    try:
        (flores_cache_dir() / "current.txt").write_text(str(path), encoding="utf-8")
    except OSError:
        pass


def open_flores(path: str | os.PathLike | None = None, split: str = DEFAULT_SPLIT) -> FloresData:
    """Open FLORES data from a folder, a `.tar.gz` archive or parquet file(s); None uses the default location."""
    if path is None or str(path).strip() == "":
        p = default_flores_path()
        if p is None:
            raise DataError(
                f"no FLORES data configured: pass a folder or archive, set ${ENV_VAR}, "
                "or download it (download_official / download_flores_plus) when online"
            )
    else:
        p = check_not_special(Path(path).expanduser())
    if not p.exists():
        raise DataError(f"FLORES data not found: {p} does not exist")
    return _opened(str(p.resolve()), split)


@memoize(maxsize=8)
def _opened(resolved: str, split: str) -> FloresData:
    """The FLORES data of a resolved path and split, opened once per process (the most recent 8 kept)."""
    return _open(Path(resolved), split)


def _open(p: Path, split: str) -> FloresData:
    if p.is_file():
        name = p.name.lower()
        if name.endswith((".tar.gz", ".tgz", ".tar")):
            return _open(extract_archive(p), split)
        if name.endswith(".parquet"):
            files = _parquet_files_single(p)
            return FloresData(p, split, "parquet", files)
        if name.endswith(f".{split}"):
            return FloresData(p.parent, split, "text", _text_files(p.parent, split))
        raise DataError(f"{p} is not a FLORES folder, .tar.gz archive or parquet file")
    found = _find_split_dir(p, split)
    if found is None:
        raise DataError(
            f"no FLORES '{split}' files in {p} (expected {split}/<code>.{split}, "
            f"{split}/<code>.parquet, {split}/<code>.jsonl or flores200_dataset.tar.gz)"
        )
    d, kind = found
    if kind == "text":
        files = _text_files(d, split)
    elif kind == "jsonl":
        files = {
            canonical_code(p.stem): (p, None) for p in sorted(d.glob("*.jsonl")) if _CODE_RE.match(p.stem)
        }
    else:
        files = _parquet_files(d, split)
    if not files:
        raise DataError(f"the folder {d} has no FLORES '{split}' language files")
    data = FloresData(d, split, kind, files)
    for folder in (d, d.parent, p):
        data.aliases.update(read_aliases(folder / "aliases.tsv"))
    return data


def read_aliases(path: Path) -> dict[str, str]:
    """`requested_code → flores200_file` pairs from an aliases.tsv (header line, tab-separated); {} if absent."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        cells = line.split("\t")
        if i == 0 or len(cells) < 2 or not _CODE_RE.match(cells[0].strip()):
            continue
        out[cells[0].strip()] = cells[1].strip()
    return out


def _parquet_files_single(p: Path) -> dict[str, tuple[Path, str | None]]:
    stem = p.stem.split("-")[0]
    if _CODE_RE.match(stem):
        return {canonical_code(stem): (p, None)}
    tmp = _parquet_files_multi(p)
    if not tmp:
        raise DataError(f"{p}: no FLORES languages found in this parquet file")
    return tmp


def _parquet_files_multi(p: Path) -> dict[str, tuple[Path, str | None]]:
    if not parquet_available():
        raise DataError(f"{p} is a parquet file, but reading it needs pyarrow, which is not installed")
    import pyarrow.parquet as pq  # noqa: PLC0415 - heavy, only for parquet sources

    try:
        t = pq.read_table(p, columns=["iso_639_3", "iso_15924"])
    except Exception as e:  # noqa: BLE001
        raise DataError(f"{p}: not a FLORES+ parquet file ({e})") from e
    out: dict[str, tuple[Path, str | None]] = {}
    for lang, script in set(zip(t.column("iso_639_3").to_pylist(), t.column("iso_15924").to_pylist())):
        out[canonical_code(f"{lang}_{script}")] = (p, f"{lang}_{script}")
    return out


def dataset(split: str = DEFAULT_SPLIT) -> FloresData:
    """The default FLORES data (:func:`default_flores_path`); DataError with what to do when none is configured."""
    return open_flores(None, split=split)


def available_codes(split: str = DEFAULT_SPLIT) -> list[str]:
    """The language codes of the default FLORES data, or [] when none is configured or readable."""
    try:
        return dataset(split).codes
    except DataError:
        return []


def lines(lang: str, split: str = DEFAULT_SPLIT) -> list[str]:
    """The sentences of one language of the default FLORES data (aliases accepted)."""
    return dataset(split).lines(lang)


def split_lines(lang: str, n_train: int = FLORES_TRAIN_LINES) -> tuple[list[str], list[str]]:
    """One language's devtest lines split into (training = the first `n_train`, held out = the rest)."""
    got = lines(lang)
    n_train = max(0, min(n_train, len(got) - 1))
    return got[:n_train], got[n_train:]


# --------------------------------------------------------------------------------------------------
# Archives and downloads
# --------------------------------------------------------------------------------------------------
def flores_cache_dir() -> Path:
    """Where archives are downloaded and extracted (`<cache_dir>/flores`)."""
    d = cache_dir() / "flores"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _extract_plain(tf: tarfile.TarFile, dest: Path, archive: Path) -> None:
    """Extract the regular files and folders of `tf` under `dest`, and nothing else: no links, devices or FIFOs,
    no absolute or ``..`` names, no owners or modes from the archive. The same on every Python 3.11 (the
    ``filter="data"`` argument of :meth:`tarfile.TarFile.extractall` is missing before 3.11.4, e.g. on Debian 12's
    3.11.2). The declared sizes are added up before anything is written: more than
    :data:`MAX_ARCHIVE_BYTES` or :data:`MAX_ARCHIVE_MEMBERS` is refused."""
    plan: list[tuple[tarfile.TarInfo, Path]] = []
    total = 0
    for n, mb in enumerate(tf, start=1):
        if n > MAX_ARCHIVE_MEMBERS:
            raise DataError(
                f"{archive} holds more than {MAX_ARCHIVE_MEMBERS:,} entries: not a FLORES archive"
            )
        if not (mb.isfile() or mb.isdir()):
            continue
        parts = [p for p in mb.name.replace("\\", "/").split("/") if p not in ("", ".")]
        if mb.name.startswith(("/", "\\")) or ".." in parts or not parts:
            raise DataError(f"{archive} holds an entry outside its folder ({mb.name!r}): refused")
        total += mb.size if mb.isfile() else 0
        if total > MAX_ARCHIVE_BYTES:
            raise DataError(
                f"{archive} unpacks to more than {MAX_ARCHIVE_BYTES >> 20:,} MiB: not a FLORES archive"
            )
        plan.append((mb, dest.joinpath(*parts)))
    for mb, target in plan:
        if mb.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        src = tf.extractfile(mb)
        if src is None:
            continue
        with src, open(target, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)


def extract_archive(archive: Path) -> Path:
    """Extract a FLORES `.tar.gz` once into the cache (keyed by its SHA-256) and return the folder."""
    m = hashlib.sha256()
    try:
        with open(archive, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                m.update(chunk)
    except OSError as e:
        raise DataError(f"cannot read archive {archive}: {e}") from e
    dest = flores_cache_dir() / f"extract-{m.hexdigest()[:16]}"
    if (dest / ".complete").is_file():
        return dest
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(archive) as tf:
            _extract_plain(tf, tmp, archive)
    except (tarfile.TarError, OSError, EOFError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(f"{archive} is not a readable .tar.gz archive: {e}") from e
    (tmp / ".complete").write_text("ok")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.replace(dest)
    return dest


def download_official(
    url: str = OFFICIAL_URL, progress: Progress | None = None, timeout: float = 30.0
) -> Path:
    """Download the official FLORES-200 archive into the cache (progress(done, total) per chunk) and extract it."""
    target = flores_cache_dir() / Path(url.split("?")[0]).name
    if not target.name.endswith((".tar.gz", ".tgz", ".tar")):
        target = target.with_name("flores200_dataset.tar.gz")
    if not target.is_file():
        part = target.with_name(target.name + ".part")
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r, open(part, "wb") as f:
                total = r.headers.get("Content-Length")
                total_n = int(total) if total and total.isdigit() else None
                done = 0
                while True:
                    chunk = r.read(1 << 16)
                    if not chunk:
                        break
                    f.write(chunk)
                    done += len(chunk)
                    report(progress, done, total_n, "bytes")
        except OSError as e:  # URLError, timeouts, no network
            part.unlink(missing_ok=True)
            raise DataError(
                f"could not download FLORES-200 from {url} ({e}); offline? Point to a local folder or set ${ENV_VAR}"
            ) from e
        part.replace(target)
    out = extract_archive(target)
    _remember_download(out)
    return out


def download_flores_plus(
    split: str = DEFAULT_SPLIT, progress: Progress | None = None, token: str | None = None
) -> Path:
    """Fetch the `openlanguagedata/flores_plus` split (parquet) from the hub into its cache; returns the folder."""
    if not parquet_available():
        raise DataError("FLORES+ is distributed as parquet, which needs pyarrow; it is not installed")
    try:
        from huggingface_hub import snapshot_download  # noqa: PLC0415 - heavy, only when downloading
    except ImportError as e:
        raise DataError("huggingface_hub is not installed; cannot download FLORES+") from e
    tqdm_class = _progress_tqdm(progress) if progress else None
    try:
        path = snapshot_download(
            repo_id=FLORES_PLUS_REPO,
            repo_type="dataset",
            allow_patterns=[f"{split}/*"],
            token=token,
            tqdm_class=tqdm_class,
        )
    except Exception as e:  # noqa: BLE001 - offline, gated, network errors
        raise DataError(
            f"could not fetch {FLORES_PLUS_REPO} from the hub ({type(e).__name__}: {e}). The dataset is gated: "
            f"accept its terms and pass a token; offline, point to a local folder or set ${ENV_VAR}"
        ) from e
    _remember_download(Path(path))
    return Path(path)


def _progress_tqdm(progress: Progress):
    """A tqdm subclass forwarding byte progress to a callback (what huggingface_hub accepts as tqdm_class)."""

    class _CallbackTqdm(tqdm):  # type: ignore[misc]
        def update(self, n: float | None = 1) -> bool | None:
            """Advance the bar and report (bytes done, total) to the callback."""
            out = super().update(n)
            try:
                progress(int(self.n), int(self.total) if self.total else None, "bytes")
            except Exception:  # noqa: BLE001 - a UI callback must never break the download
                pass
            return out

    return _CallbackTqdm
