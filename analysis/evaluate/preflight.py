"""Pre-flight checks on an exported Hugging Face folder: what breaks an edited tokenizer in the field.

Each check is pass / fail / fixed (fixed: the check failed and `fix=True` wrote the accepted form), or skip when
its inputs are absent (no weights, no original model):

* ``json_files`` — every JSON file of the folder parses (the Hugging Face config files as JSON objects): a reader
  such as transformers fails on the folder otherwise, so an unreadable file is a failure (never read as absent),
  which `--fix` cannot repair and does not overwrite;
* ``ids_fit`` — every tokenizer id < the embedding rows, and `config.json`'s `vocab_size` = the rows
  (llama.cpp #6111, arcee-ai/mergekit #428);
* ``special_ids`` — bos/eos/pad agree across `config.json`, `generation_config.json` (eos as the list of
  terminators), `tokenizer_config.json` and `special_tokens_map.json` (a drifting eos: the model never stops);
* ``chat_template`` — written both as `chat_template.jinja` and inline in `tokenizer_config.json` (a
  `chat_template.jinja` that is empty or not UTF-8 fails, and is never copied inline);
* ``legacy_fields`` — fields older readers choke on in their accepted form (`extra_special_tokens` as a list,
  a `tokenizer_class` transformers 4 does not know, `dtype` without `torch_dtype`);
* ``rows_unchanged`` — the rows of unchanged ids bit-identical to the original model (input, head, head bias),
  a tied head still tied;
* ``padding_rows`` — embedding rows no token uses, with the largest probability the model gives them on
  held-out text; `mask=True` lists them in `generation_config.json`'s `suppress_tokens` (vllm #13175).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.core.inputs import decode_utf8, parse_json, read_file
from analysis.core.outputs import atomic_write_text
from analysis.errors import DataError
from analysis.model.config_files import read_json_file, write_json_file
from analysis.tokenizer.tokenizer import LoadedTokenizer

STATUSES = ("pass", "fail", "fixed", "skip")
#: tokenizer_class values transformers 4.x resolves (the generic fast class and the common model classes).
ACCEPTED_TOKENIZER_CLASSES = (
    "PreTrainedTokenizerFast",
    "GPT2Tokenizer",
    "GPT2TokenizerFast",
    "LlamaTokenizer",
    "LlamaTokenizerFast",
    "Qwen2Tokenizer",
    "Qwen2TokenizerFast",
    "BertTokenizer",
    "BertTokenizerFast",
)


@dataclass
class Check:
    """One pre-flight check."""

    name: str
    status: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        """JSON form."""
        return {"name": self.name, "status": self.status, "detail": self.detail, "data": self.data}


#: The Hugging Face files that must hold a JSON object.
OBJECT_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "added_tokens.json",
    "vocab.json",
    "model.safetensors.index.json",
)


def json_problem(path: Path) -> str | None:
    """Why a JSON file of an export cannot be read (None when it reads, or is absent)."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        doc = parse_json(read_file(path), path.name)
    except DataError as e:
        return str(e)
    if path.name in OBJECT_FILES and not isinstance(doc, dict):
        return f"{path.name} holds a JSON {type(doc).__name__}, not an object"
    return None


def template_problem(path: Path) -> str | None:
    """Why chat_template.jinja cannot be used (not UTF-8, empty, unreadable); None when it can or is absent."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        text = decode_utf8(read_file(path), path.name)
    except DataError as e:
        return str(e)
    if not text.strip():
        return f"{path.name} is empty: readers find a template that renders nothing"
    return None


def check_json_files(folder: Path) -> Check:
    """Every `*.json` of the folder parses (the config files as objects; chat_template.jinja is the
    ``chat_template`` check's)."""
    names = sorted(p.name for p in folder.glob("*.json"))
    problems = [m for n in names if (m := json_problem(folder / n))]
    data = {"files": names}
    if problems:
        detail = "readers such as transformers fail on this folder: " + "; ".join(problems)
        return Check("json_files", "fail", detail, data)
    return Check("json_files", "pass", f"{len(names)} JSON files read", data)


def _writable_json(path: Path) -> bool:
    """Whether a fix may (re)write `path`: absent or readable — never over a file that could not be read."""
    return json_problem(path) is None


def _content(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]
    return None


def _as_list(v: Any) -> list[int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return [v]
    if isinstance(v, list):
        return [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
    return []


def check_ids_fit(tok: LoadedTokenizer, rows: int | None, config: dict | None) -> Check:
    """Every id < embedding rows; config.json's vocab_size = rows."""
    if rows is None:
        return Check("ids_fit", "skip", "no model weights in the export")
    top = max(tok.id_to_token) if tok.id_to_token else -1
    vs = (config or {}).get("vocab_size")
    problems = []
    if top >= rows:
        problems.append(f"token id {top} ≥ {rows} embedding rows")
    if vs is not None and vs != rows:
        problems.append(f"config.json vocab_size {vs} ≠ {rows} embedding rows")
    data = {"max_id": top, "rows": rows, "config_vocab_size": vs}
    if problems:
        return Check("ids_fit", "fail", "; ".join(problems), data)
    return Check("ids_fit", "pass", f"ids 0…{top} fit {rows} rows; vocab_size {vs}", data)


def check_special_ids(folder: Path, tok: LoadedTokenizer, *, fix: bool = False) -> Check:
    """bos/eos/pad ids consistent across the four files; generation_config's eos a list containing the
    config's and the tokenizer's eos."""
    cfg = read_json_file(folder / "config.json")
    gen = read_json_file(folder / "generation_config.json")
    tcfg = read_json_file(folder / "tokenizer_config.json") or {}
    stm = read_json_file(folder / "special_tokens_map.json") or {}
    problems: list[str] = []
    fixes: dict[str, Any] = {}
    ids: dict[str, Any] = {}
    for kind in ("bos", "eos", "pad"):
        content = _content(tcfg.get(f"{kind}_token"))
        tid = tok.tokenizer.token_to_id(content) if content is not None else None
        if content is not None and tid is None:
            problems.append(f"tokenizer_config {kind}_token {content!r} is not in the vocabulary")
        smap = _content(stm.get(f"{kind}_token"))
        if smap is not None and content is not None and smap != content:
            problems.append(f"special_tokens_map {kind}_token {smap!r} ≠ tokenizer_config {content!r}")
        cid = (cfg or {}).get(f"{kind}_token_id")
        ids[kind] = {"tokenizer": tid, "config": cid}
        if cfg is not None and tid is not None and cid is not None and tid not in _as_list(cid):
            problems.append(f"config.json {kind}_token_id {cid} ≠ the tokenizer's {kind} id {tid}")
    if gen is not None:
        geos = gen.get("eos_token_id")
        ids["eos"]["generation"] = geos
        want = [
            i for i in (ids["eos"]["tokenizer"], *_as_list((cfg or {}).get("eos_token_id"))) if i is not None
        ]
        missing = [i for i in dict.fromkeys(want) if i not in _as_list(geos)]
        if missing or (geos is not None and not isinstance(geos, list)):
            why = f"generation_config eos_token_id {geos!r} is not a list of the terminators {sorted(set(want))}"
            problems.append(why)
            fixes["eos_token_id"] = list(dict.fromkeys(_as_list(geos) + want))
        top = max(tok.id_to_token)
        for key in ("bos_token_id", "pad_token_id"):
            bad = [i for i in _as_list(gen.get(key)) if i > top]
            if bad:
                problems.append(f"generation_config {key} {bad} is past the vocabulary")
    if not problems:
        return Check("special_ids", "pass", "bos/eos/pad agree across the four files", {"ids": ids})
    only_gen = all(p.startswith("generation_config eos_token_id") for p in problems)
    if fix and only_gen and gen is not None and _writable_json(folder / "generation_config.json"):
        gen["eos_token_id"] = fixes["eos_token_id"]
        write_json_file(folder / "generation_config.json", gen)
        return Check("special_ids", "fixed", "; ".join(problems), {"ids": ids, "written": fixes})
    return Check("special_ids", "fail", "; ".join(problems), {"ids": ids})


def check_chat_template(folder: Path, *, fix: bool = False) -> Check:
    """The chat template both as chat_template.jinja and inline in tokenizer_config.json (and the same)."""
    tpath = folder / "tokenizer_config.json"
    tcfg = read_json_file(tpath)
    jinja = folder / "chat_template.jinja"
    inline = (tcfg or {}).get("chat_template")
    inline = inline if isinstance(inline, str) and inline else None
    problem = template_problem(jinja)
    if problem is not None:  # not UTF-8, empty or unreadable: never copied inline
        return Check("chat_template", "fail", problem)
    filed = decode_utf8(read_file(jinja), jinja.name) if jinja.is_file() else None
    if inline is None and filed is None:
        return Check("chat_template", "pass", "no chat template (nothing to find)")
    if inline is not None and filed is not None and inline == filed:
        return Check("chat_template", "pass", "chat_template.jinja and the inline template agree")
    if inline is not None and filed is not None:
        detail = "chat_template.jinja and the inline template differ: readers disagree on the template"
    else:
        detail = "only inline" if filed is None else "only chat_template.jinja"
        detail = f"the chat template is {detail}: the other readers find none"
    if fix and tcfg is not None and _writable_json(tpath):
        template = filed if filed is not None else inline
        tcfg["chat_template"] = template
        write_json_file(tpath, tcfg)
        atomic_write_text(jinja, template)
        return Check("chat_template", "fixed", detail)
    return Check("chat_template", "fail", detail)


def check_legacy_fields(folder: Path, *, fix: bool = False) -> Check:
    """Fields older readers choke on, in their accepted form."""
    tpath, cpath = folder / "tokenizer_config.json", folder / "config.json"
    tcfg, cfg = read_json_file(tpath), read_json_file(cpath)
    problems = []
    if tcfg is not None:
        if isinstance(tcfg.get("extra_special_tokens"), list):
            problems.append("tokenizer_config extra_special_tokens is a list (transformers 4 expects a dict)")
        cls = tcfg.get("tokenizer_class")
        if cls is not None and cls not in ACCEPTED_TOKENIZER_CLASSES:
            problems.append(
                f"tokenizer_class {cls!r} is unknown to transformers 4 (PreTrainedTokenizerFast reads it)"
            )
    if cfg is not None and "dtype" in cfg and "torch_dtype" not in cfg:
        problems.append(
            "config.json has dtype but no torch_dtype (transformers before 4.56 read torch_dtype)"
        )
    if not problems:
        return Check("legacy_fields", "pass", "no field older readers choke on")
    if not fix or not (_writable_json(tpath) and _writable_json(cpath)):
        return Check("legacy_fields", "fail", "; ".join(problems))
    if tcfg is not None:
        extra = tcfg.get("extra_special_tokens")
        if isinstance(extra, list):
            tcfg.pop("extra_special_tokens")
            tcfg.setdefault("additional_special_tokens", extra)
        if tcfg.get("tokenizer_class") not in (None, *ACCEPTED_TOKENIZER_CLASSES):
            tcfg["tokenizer_class"] = "PreTrainedTokenizerFast"
        write_json_file(tpath, tcfg)
    if cfg is not None and "dtype" in cfg and "torch_dtype" not in cfg:
        cfg["torch_dtype"] = cfg["dtype"]
        write_json_file(cpath, cfg)
    return Check("legacy_fields", "fixed", "; ".join(problems))


def check_rows_unchanged(
    new_tok: LoadedTokenizer, old_tok: LoadedTokenizer, new: dict[str, np.ndarray | None], old: dict[str, Any]
) -> Check:
    """Rows of ids whose token is unchanged (same string, same id) bit-identical in input, head and head bias;
    a tied head still tied. `new`/`old`: {"input", "output", "bias"} arrays (output None when tied) and "tied"."""
    same = [i for i, s in new_tok.id_to_token.items() if old_tok.id_to_token.get(i) == s]
    problems, data = [], {"unchanged_ids": len(same)}
    if bool(new.get("tied")) != bool(old.get("tied")):
        problems.append(
            f"the head was {'tied' if old.get('tied') else 'untied'} and is now {'tied' if new.get('tied') else 'untied'}"
        )
    for key in ("input", "output", "bias"):
        a, b = new.get(key), old.get(key)
        if a is None and b is None:
            continue
        if a is None or b is None:
            problems.append(f"{key}: present in one model only")
            continue
        idx = np.asarray([i for i in same if i < len(a) and i < len(b)], dtype=np.int64)
        diff = int(
            np.count_nonzero(
                np.any(np.asarray(a)[idx] != np.asarray(b)[idx], axis=-1)
                if np.ndim(a) > 1
                else np.asarray(a)[idx] != np.asarray(b)[idx]
            )
        )
        data[f"{key}_changed_rows"] = diff
        if diff:
            problems.append(f"{key}: {diff} rows of unchanged ids differ from the original")
        if len(a) != len(b) and key != "input" and len(a) != len(new.get("input", a)):
            problems.append(
                f"{key}: {len(a)} rows, but the input embedding has {len(new['input'])} (head left unresized)"
            )
    if problems:
        return Check("rows_unchanged", "fail", "; ".join(problems), data)
    return Check("rows_unchanged", "pass", f"{len(same)} unchanged ids keep bit-identical rows", data)


#: A padding row the model gives at least this probability somewhere on held-out text is one sampling can draw
#: (one draw in 10,000 positions at temperature 1): unmasked, the check fails.
PADDING_FAIL_P = 1e-4


def padding_max_probability(model: Any, unused: list[int], id_seqs: list[list[int]]) -> float:
    """The largest next-token probability a Hugging Face causal LM gives any of the `unused` rows at any position
    of the id sequences (held-out text)."""
    import torch  # noqa: PLC0415 - heavy, loaded on use

    if not unused:
        return 0.0
    idx = torch.tensor(unused, dtype=torch.long)
    best = 0.0
    with torch.no_grad():
        for ids in id_seqs:
            if not ids:
                continue
            logits = model(torch.tensor([ids], dtype=torch.long)).logits[0].double()
            probs = torch.softmax(logits, dim=-1)[:, idx]
            best = max(best, float(probs.max()))
    return best


def check_padding_rows(
    folder: Path, tok: LoadedTokenizer, rows: int, *, max_prob: float | None = None, fix: bool = False
) -> Check:
    """Embedding rows no token uses: listed with the largest probability the model gives them on held-out text
    (`max_prob`, when measured); fail when they are neither masked (`suppress_tokens` in generation_config.json)
    nor improbable (< :data:`PADDING_FAIL_P`); `fix` masks them."""
    unused = [i for i in range(rows) if i not in tok.id_to_token]
    gen = read_json_file(folder / "generation_config.json") or {}
    masked = set(_as_list(gen.get("suppress_tokens")))
    open_rows = [i for i in unused if i not in masked]
    data = {
        "rows": unused[:50],
        "count": len(unused),
        "unmasked": len(open_rows),
        "max_probability": max_prob,
    }
    if not unused:
        return Check("padding_rows", "pass", f"every one of the {rows} embedding rows is a token", data)
    prob = "" if max_prob is None else f"; the model gives them at most p = {max_prob:.3g} on held-out text"
    if not open_rows:
        return Check(
            "padding_rows", "pass", f"{len(unused)} unused rows, all masked (suppress_tokens){prob}", data
        )
    risky = max_prob is None or max_prob >= PADDING_FAIL_P
    detail = f"{len(open_rows)} unused rows not masked{prob}"
    if fix and _writable_json(folder / "generation_config.json"):
        mask_padding_rows(folder, open_rows)
        return Check(
            "padding_rows", "fixed", detail + "; masked in generation_config.json suppress_tokens", data
        )
    if risky:
        why = (
            "not measured (no model probe)"
            if max_prob is None
            else f"≥ {PADDING_FAIL_P:g}: sampling can draw them"
        )
        return Check("padding_rows", "fail", f"{detail} ({why}; --fix masks them)", data)
    return Check("padding_rows", "pass", f"{detail} (< {PADDING_FAIL_P:g}; --fix masks them)", data)


def mask_padding_rows(folder: Path, ids: list[int]) -> None:
    """List `ids` in generation_config.json's `suppress_tokens` (generation never samples them)."""
    gpath = folder / "generation_config.json"
    if not _writable_json(gpath):
        raise DataError(f"{gpath.name} cannot be read: not overwritten ({json_problem(gpath)})")
    gen = read_json_file(gpath) or {}
    gen["suppress_tokens"] = sorted(set(_as_list(gen.get("suppress_tokens")) + list(ids)))
    write_json_file(gpath, gen)
