"""Export an edited tokenizer as a Hugging Face folder (or zip) that `AutoTokenizer` and `tokenizers` load.

Generic: works for any `LoadedTokenizer` (extension, pruning, …). The folder holds
* `tokenizer.json` — merges always in list form (`[["a", "b"], …]`, safe for tokens with spaces), the
  post-processor's special-token ids re-synchronised with the vocabulary;
* `tokenizer_config.json` — the base config with `added_tokens_decoder` rebuilt from the document and a
  fast tokenizer class, so `AutoTokenizer` uses `tokenizer.json` as written;
* `special_tokens_map.json`;
* `chat_template.jinja` when the tokenizer has a chat template (also kept inline in `tokenizer_config.json`: older
  readers find only the inline one, newer ones prefer the file);
* optionally a JSON report of the run (`extension_report.json` or any name).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from analysis.core.outputs import atomic_folder, json_ready, strict_json
from analysis.core.paths import public_source

from .document import parse_merges
from .tokenizer import LoadedTokenizer

#: Config keys naming special tokens (written to special_tokens_map.json when set).
SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
#: Config keys dropped on export (they describe files or classes we do not write).
_DROP_KEYS = (
    "auto_map",
    "tokenizer_file",
    "vocab_file",
    "merges_file",
    "name_or_path",
    "added_tokens_decoder",
)
#: `tokenizer_class` values that rebuild their pipeline in Python instead of trusting tokenizer.json.
_FAST_CLASS = "PreTrainedTokenizerFast"


def token_id_map(doc: dict) -> dict[str, int]:
    """token → id over a document's model vocabulary and added tokens (added tokens win)."""
    vocab = doc.get("model", {}).get("vocab")
    out: dict[str, int] = {}
    if isinstance(vocab, dict):
        out.update(vocab)
    elif isinstance(vocab, list):  # Unigram: [[piece, score], …]
        out.update({p[0]: i for i, p in enumerate(vocab)})
    for a in doc.get("added_tokens") or []:
        out[a["content"]] = a["id"]
    return out


def sync_post_processor(doc: dict) -> dict:
    """Rewrite the post-processor's special-token ids (TemplateProcessing, Bert/Roberta) from the vocabulary.

    Edits `doc` in place and returns it. Tokens no longer in the vocabulary keep their old ids.
    """
    ids = token_id_map(doc)

    def fix(node: Any) -> None:
        if not isinstance(node, dict):
            return
        t = node.get("type")
        if t == "TemplateProcessing":
            for name, spec in (node.get("special_tokens") or {}).items():
                toks = spec.get("tokens") or [name]
                if all(x in ids for x in toks):
                    spec["ids"] = [ids[x] for x in toks]
        elif t in ("BertProcessing", "RobertaProcessing"):
            for key in ("sep", "cls"):
                pair = node.get(key)
                if isinstance(pair, list) and len(pair) == 2 and pair[0] in ids:
                    node[key] = [pair[0], ids[pair[0]]]
        for child in node.get("processors") or []:
            fix(child)

    fix(doc.get("post_processor"))
    return doc


def export_document(tok: LoadedTokenizer) -> dict:
    """The tokenizer.json document to write: merges in list form, post-processor ids in sync, no padding/truncation."""
    doc = json.loads(tok.to_json())
    # the app works with padding and truncation off; the exported file must tokenize the same way
    doc["truncation"] = None
    doc["padding"] = None
    model = doc.get("model", {})
    if model.get("type") == "BPE" and "merges" in model:
        model["merges"] = [list(m) for m in parse_merges(model["merges"])]
    return sync_post_processor(doc)


def _token_content(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        return v.get("content")
    return None


def build_config(tok: LoadedTokenizer, doc: dict, base_config: dict | None = None) -> dict:
    """tokenizer_config.json for the exported folder (base config + added_tokens_decoder from the document)."""
    cfg = {
        k: v
        for k, v in (base_config if base_config is not None else tok.config or {}).items()
        if k not in _DROP_KEYS
    }
    ids = token_id_map(doc)
    for key in SPECIAL_KEYS:  # drop special-token settings that no longer exist in the vocabulary
        c = _token_content(cfg.get(key))
        if c is not None and c not in ids:
            cfg.pop(key)
    cfg["added_tokens_decoder"] = {
        str(a["id"]): {
            "content": a["content"],
            "lstrip": bool(a.get("lstrip")),
            "normalized": bool(a.get("normalized")),
            "rstrip": bool(a.get("rstrip")),
            "single_word": bool(a.get("single_word")),
            "special": bool(a.get("special")),
        }
        for a in sorted(doc.get("added_tokens") or [], key=lambda a: a["id"])
    }
    # the generic fast class loads tokenizer.json verbatim (model-specific classes may rebuild the pipeline)
    cfg["tokenizer_class"] = _FAST_CLASS
    # transformers 5 writes extra_special_tokens as a list, which transformers 4 cannot read (it expects a dict):
    # the list form every version reads is additional_special_tokens
    extra = cfg.get("extra_special_tokens")
    if isinstance(extra, list):
        cfg.pop("extra_special_tokens")
        if extra and not cfg.get("additional_special_tokens"):
            cfg["additional_special_tokens"] = extra
    cfg.setdefault("clean_up_tokenization_spaces", False)
    return cfg


def special_tokens_map(cfg: dict) -> dict:
    """special_tokens_map.json from a tokenizer config."""
    out: dict[str, Any] = {}
    for key in SPECIAL_KEYS:
        c = _token_content(cfg.get(key))
        if c is not None:
            out[key] = c
    extra = cfg.get("additional_special_tokens") or cfg.get("extra_special_tokens")
    if isinstance(extra, list) and extra:
        out["additional_special_tokens"] = [_token_content(x) for x in extra if _token_content(x)]
    return out


def folder_files(
    tok: LoadedTokenizer,
    report: dict | None = None,
    *,
    base_config: dict | None = None,
    report_name: str = "extension_report.json",
) -> dict[str, bytes]:
    """File name → bytes of the exported Hugging Face folder."""
    doc = export_document(tok)
    cfg = build_config(tok, doc, base_config)
    files = {
        "tokenizer.json": json.dumps(doc, ensure_ascii=False, indent=None).encode("utf-8"),
        "tokenizer_config.json": strict_json(json_ready(cfg)).encode("utf-8"),
        "special_tokens_map.json": strict_json(special_tokens_map(cfg)).encode("utf-8"),
    }
    template = cfg.get("chat_template")
    if isinstance(template, str) and template:  # inline AND as chat_template.jinja: every reader finds one
        files["chat_template.jinja"] = template.encode("utf-8")
    if report is not None:
        files[report_name] = strict_json(json_ready(_plain(report))).encode("utf-8")
    return files


def _plain(o: Any) -> Any:
    """Report values as JSON types: numpy scalars → numbers, sets → sorted lists, tuples → lists, others → str."""
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
    if isinstance(o, (set, frozenset)):
        return sorted(_plain(v) for v in o)
    if o is None or isinstance(o, (str, int, float, bool)):
        return o
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def write_files(folder: str | Path, files: Mapping[str, bytes]) -> list[str]:
    """Write `files` (relative path → bytes) into an existing folder, typically the temporary folder of
    :func:`analysis.core.outputs.atomic_folder`; returns the relative paths written (the export's manifest)."""
    root = Path(folder)
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return list(files)


def write_folder(
    tok: LoadedTokenizer,
    out_dir: str | Path,
    report: dict | None = None,
    *,
    base_config: dict | None = None,
    report_name: str = "extension_report.json",
    replace: bool = False,
    extra: Mapping[str, bytes] | None = None,
) -> Path:
    """Write the Hugging Face folder (plus `extra` files) to out_dir atomically; returns its path.

    The folder is built beside out_dir and renamed into place: a reader sees no folder or the complete one.
    An existing non-empty out_dir is refused (DataError) unless `replace`, which replaces it whole.
    """
    files = folder_files(tok, report, base_config=base_config, report_name=report_name)
    with atomic_folder(out_dir, replace=replace) as tmp:
        write_files(tmp, {**files, **(extra or {})})
    return Path(out_dir)


def safe_folder_name(name: str, default: str = "tokenizer") -> str:
    """A file-system and zip-safe folder name from a tokenizer name (no separators, `..`, control characters)."""
    out = "".join(c if c.isalnum() or c in "-_.+() " else "_" for c in name).strip(" .")
    return out[:100].replace(" ", "_") or default


def zip_files(files: Mapping[str, bytes] | Iterable[tuple[str, bytes]], folder: str = "") -> bytes:
    """The one zip writer: (name, bytes) pairs as deflated zip bytes, under `folder/` when given. Every zip the
    engine offers (an exported tokenizer, a session library, a pruned folder, an R-BPE folder) is built here."""
    items = files.items() if isinstance(files, Mapping) else files
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in items:
            zf.writestr(f"{folder}/{name}" if folder else name, data)
    return buf.getvalue()


def zip_folder(folder: str | Path, archive: str | Path) -> None:
    """A folder on disk as a zip file on disk, its files under the folder's name, stored uncompressed (model
    weights do not shrink, and deflating 500 MB costs half a minute) and read file by file, so a model never sits
    in memory whole: the edited model a job keeps (:mod:`analysis.views.model_jobs`). The one zip writer's
    on-disk twin."""
    folder = Path(folder)
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            zf.write(f, f"{folder.name}/{f.relative_to(folder).as_posix()}")


def zip_bytes(
    tok: LoadedTokenizer,
    report: dict | None = None,
    *,
    folder: str = "tokenizer",
    base_config: dict | None = None,
    report_name: str = "extension_report.json",
) -> bytes:
    """The exported folder as zip bytes (for a download button); files sit under `folder/`."""
    folder = safe_folder_name(folder, "") if folder else ""
    return zip_files(folder_files(tok, report, base_config=base_config, report_name=report_name), folder)


# --------------------------------------------------------------------------------------------------
# A session's library as one zip (uploads and edits survive a browser reload this way)
# --------------------------------------------------------------------------------------------------
LIBRARY_FORMAT = "tokenizer-lab-library"
LIBRARY_MANIFEST = "library.json"


def library_zip(entries: Mapping[str, LoadedTokenizer]) -> bytes:
    """Name → tokenizer as a zip: `library.json` (names, sources, order) and one folder per tokenizer holding
    its `tokenizer.json` (and `tokenizer_config.json` when it has a config). Read back by
    :func:`analysis.tokenizer.sources.load_library_zip`."""
    manifest: dict[str, Any] = {"format": LIBRARY_FORMAT, "version": 1, "entries": []}
    files: dict[str, bytes] = {}
    for k, (name, tok) in enumerate(entries.items(), 1):
        folder = f"{k:03d}"
        manifest["entries"].append({"name": name, "folder": folder, "source": public_source(tok.source)})
        files[f"{folder}/tokenizer.json"] = tok.to_json().encode("utf-8")
        if tok.config:
            files[f"{folder}/tokenizer_config.json"] = strict_json(json_ready(tok.config)).encode("utf-8")
    files[LIBRARY_MANIFEST] = strict_json(manifest).encode("utf-8")
    return zip_files(files)
