"""GGUF files with model weights, for an edited tokenizer: from a GGUF source or from a Hugging Face folder.

* :func:`write_gguf_from_gguf` — the source is itself GGUF (the demo SmolLM2 Q4_1): its metadata is kept except
  the tokenizer (`tokenizer.ggml.*`, `tokenizer.chat_template`, `<arch>.vocab_size`), which is written for the
  edited tokenizer; the two tensors an edit resizes (`token_embd.weight` and, for an untied head,
  `output.weight`) are rewritten from the given rows as F32 (default; a de-quantized Q8_0/Q4_x row is exact in
  F32) or F16; every other tensor is copied byte for byte, in its own quantisation. The pre-tokenizer
  (`tokenizer.ggml.pre`) and the special tokens, add-BOS/EOS flags and chat template are the source file's own
  (special tokens carried by their string, so a pruned id follows its token).
* :func:`write_gguf_from_hf` — a Hugging Face safetensors folder of the Llama architecture (`LlamaForCausalLM`:
  Llama, SmolLM, …) with its tensors named as llama.cpp's converter names them (gguf-py's tensor name map) and
  the query/key projections permuted to llama.cpp's rotary layout, as F32 or F16 (1-D norms stay F32).
* :func:`compare_logprobs` — next-token log-probabilities of the GGUF model in llama.cpp and of the Hugging Face
  model on the same ids: mean/max absolute difference and the share of positions with the same top-1 token.

Files are written through a temporary sibling and a rename (never half-written, never replacing a device, FIFO
or folder).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.core.outputs import atomic_write_file
from analysis.errors import DataError, ModelLoadError, TokenizerLoadError
from analysis.tokenizer.gguf_export import GgufVocab, add_vocab_to_writer, gguf_vocab, write_vocab_gguf
from analysis.tokenizer.gguf_file import read_gguf_header
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .llamacpp import llama_logprobs, open_gguf
from .safetensors_file import read_safetensors_header
from .source import resolve_model
from .weights import load_embeddings

DTYPES = ("f32", "f16")
#: The tensors an edit of the vocabulary resizes (one row per token id).
RESIZED = ("token_embd.weight", "output.weight")
#: `tokenizer.ggml.*_token_id` keys of a GGUF file and the GgufVocab.special_ids key each becomes.
_SPECIAL_KEYS = {
    "tokenizer.ggml.bos_token_id": "bos",
    "tokenizer.ggml.eos_token_id": "eos",
    "tokenizer.ggml.unknown_token_id": "unknown",
    "tokenizer.ggml.seperator_token_id": "seperator",
    "tokenizer.ggml.padding_token_id": "padding",
    "tokenizer.ggml.mask_token_id": "mask",
}
#: Hugging Face architectures :func:`write_gguf_from_hf` converts.
HF_ARCHITECTURES = ("LlamaForCausalLM",)


@dataclass
class GgufWriteInfo:
    """What a GGUF writer wrote."""

    path: str
    source: str  # "gguf" | "safetensors"
    architecture: str
    rows: int
    tensors: int
    copied: int
    rewritten: dict[str, str] = field(default_factory=dict)  # tensor → type written
    vocab: dict[str, Any] = field(default_factory=dict)
    bytes: int = 0

    def to_json(self) -> dict:
        """JSON form (the file name only, no server path)."""
        return {
            "file": Path(self.path).name,
            "source": self.source,
            "architecture": self.architecture,
            "rows": self.rows,
            "tensors": self.tensors,
            "copied_byte_for_byte": self.copied,
            "rewritten": dict(self.rewritten),
            "vocab": dict(self.vocab),
            "bytes": self.bytes,
        }


def _gguf() -> Any:
    try:
        import gguf  # noqa: PLC0415 - heavy, loaded on use
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ModelLoadError("the `gguf` package is needed to write .gguf files") from e
    return gguf


def _write_atomically(path: str | os.PathLike, fill: Callable[[Any], None], arch: str) -> int:
    """Let `fill` add metadata and tensors to a `gguf.GGUFWriter` and write it atomically to `path`
    (:func:`analysis.core.outputs.atomic_write_file`: a regular file or a new one only); the size written."""
    gguf = _gguf()

    def write(tmp: Path) -> None:
        writer = gguf.GGUFWriter(str(tmp), arch)
        fill(writer)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()

    return atomic_write_file(path, write).stat().st_size


def _open_reader(path: str | os.PathLike) -> Any:
    gguf = _gguf()
    p = Path(path)
    try:
        return gguf.GGUFReader(str(p))
    except Exception as e:  # the reader raises ValueError/struct errors/IndexError on bad files
        raise ModelLoadError(f"{p.name}: not a readable GGUF file ({e.__class__.__name__}: {e})") from e


def _field_value(f: Any) -> Any:
    try:
        return f.contents()
    except Exception:  # noqa: BLE001 - a value the reader cannot decode is treated as absent
        return None


def _rows_array(rows: Any, dtype: str, name: str) -> np.ndarray:
    if dtype not in DTYPES:
        raise DataError(f"unknown GGUF tensor type {dtype!r}; choose one of {', '.join(DTYPES)}")
    a = np.asarray(rows)
    if a.ndim != 2 or not np.issubdtype(a.dtype, np.floating):
        raise DataError(f"{name}: expected a 2-D float matrix of rows, got shape {a.shape} ({a.dtype})")
    return np.ascontiguousarray(a, dtype=np.float32 if dtype == "f32" else np.float16)


def source_vocab(reader: Any, tok: LoadedTokenizer, n_rows: int) -> GgufVocab:
    """The tokenizer metadata of `tok` for a file made from the GGUF `reader`: the source's pre-tokenizer, its
    special tokens (by string, so an id that moved follows its token), add-BOS/EOS/space-prefix flags and chat
    template; tokens, types and merges from `tok`, padded to `n_rows`."""
    fields = reader.fields

    def val(key: str) -> Any:
        f = fields.get(key)
        return None if f is None else _field_value(f)

    pre = val("tokenizer.ggml.pre") or None
    template = val("tokenizer.chat_template")
    vocab = gguf_vocab(tok, pre=pre, config={}, chat_template=template, n_rows=n_rows)
    tokens_field = fields.get("tokenizer.ggml.tokens")
    vocab.special_ids = {}
    for key, name in _SPECIAL_KEYS.items():
        tid = val(key)
        if not isinstance(tid, int) or tokens_field is None or not 0 <= tid < len(tokens_field.data):
            continue
        s = _field_value_at(tokens_field, tid)
        new_id = tok.tokenizer.token_to_id(s) if s is not None else None
        if new_id is not None and new_id < n_rows:
            vocab.special_ids[name] = int(new_id)
    for key, attr in (
        ("tokenizer.ggml.add_bos_token", "add_bos"),
        ("tokenizer.ggml.add_eos_token", "add_eos"),
        ("tokenizer.ggml.add_space_prefix", "add_space_prefix"),
    ):
        v = val(key)
        if isinstance(v, bool):
            setattr(vocab, attr, v)
    return vocab


def _field_value_at(f: Any, i: int) -> str | None:
    try:
        return f.contents(i)
    except Exception:  # noqa: BLE001 - an undecodable token string matches nothing
        return None


def write_gguf_from_gguf(
    source: str | os.PathLike,
    tok: LoadedTokenizer,
    out: str | os.PathLike,
    *,
    input_rows: Any,
    output_rows: Any = None,
    dtype: str = "f32",
) -> GgufWriteInfo:
    """A GGUF for the edited tokenizer `tok` from the GGUF model `source`: metadata and tensors copied, the
    tokenizer metadata rewritten (:func:`source_vocab`), `token_embd.weight` written from `input_rows` (one row
    per id of `tok`, e.g. the exported Hugging Face model's embedding) and, where the source has an untied head,
    `output.weight` from `output_rows` — both as `dtype` (``f32`` or ``f16``)."""
    gguf = _gguf()
    reader = _open_reader(source)
    arch = (
        _field_value(reader.fields["general.architecture"])
        if "general.architecture" in reader.fields
        else None
    )
    if not arch:
        raise DataError(f"{Path(source).name}: no general.architecture in the GGUF file")
    inp = _rows_array(input_rows, dtype, "input rows")
    n_rows = int(inp.shape[0])
    names = [t.name for t in reader.tensors]
    if "token_embd.weight" not in names:
        raise DataError(f"{Path(source).name}: no token_embd.weight tensor to resize")
    src_embd = reader.tensors[names.index("token_embd.weight")]
    if int(src_embd.shape[0]) != inp.shape[1]:
        raise DataError(
            f"input rows have {inp.shape[1]} columns; the source embedding has {int(src_embd.shape[0])}"
        )
    head = None
    if "output.weight" in names:
        if output_rows is None:
            raise DataError(
                f"{Path(source).name} has an untied head (output.weight): give its resized rows too"
            )
        head = _rows_array(output_rows, dtype, "output rows")
        if head.shape != inp.shape:
            raise DataError(f"output rows {head.shape} do not match the input rows {inp.shape}")
    vocab = source_vocab(reader, tok, n_rows)
    skip_prefixes = ("GGUF.", "tokenizer.")
    skip = {"general.architecture", f"{arch}.vocab_size"}
    info = GgufWriteInfo(
        path=str(out), source="gguf", architecture=arch, rows=n_rows, tensors=len(names), copied=0
    )

    def fill(writer: Any) -> None:
        for key, f in reader.fields.items():
            if key.startswith(skip_prefixes) or key in skip:
                continue
            value = _field_value(f)
            if value is None or (isinstance(value, list) and not value):
                continue
            vtype = f.types[0]
            sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, value, vtype, sub)
        writer.add_vocab_size(n_rows)
        add_vocab_to_writer(writer, vocab)
        for t in reader.tensors:
            if t.name == "token_embd.weight":
                writer.add_tensor(t.name, inp)
                info.rewritten[t.name] = dtype.upper()
            elif t.name == "output.weight" and head is not None:
                writer.add_tensor(t.name, head)
                info.rewritten[t.name] = dtype.upper()
            else:
                writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
                info.copied += 1

    info.bytes = _write_atomically(out, fill, arch)
    info.vocab = vocab.to_json()
    return info


# --------------------------------------------------------------------------------------------------
# Hugging Face safetensors (Llama architecture) → GGUF
# --------------------------------------------------------------------------------------------------
def _permute_rotary(w: np.ndarray, n_head: int) -> np.ndarray:
    """Hugging Face's query/key rows (rotary halves per head) in llama.cpp's layout (interleaved pairs)."""
    rows = w.shape[0]
    if rows % (2 * n_head):
        raise DataError(f"{rows} projection rows do not split into {n_head} heads of rotary pairs")
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _rope_theta(cfg: dict) -> float:
    rp = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
    scaling = cfg.get("rope_scaling") if isinstance(cfg.get("rope_scaling"), dict) else {}
    kinds = {k for k in (rp.get("rope_type"), scaling.get("rope_type"), scaling.get("type")) if k}
    kind = next(iter(sorted(kinds - {"default"})), "default")
    if kind != "default":
        raise DataError(
            f"rope type {kind!r} needs llama.cpp's rope frequency tensor, which this writer does not make "
            "(only the default rotary embedding is converted)"
        )
    theta = rp.get("rope_theta", cfg.get("rope_theta", 10000.0))
    return float(theta)


def write_gguf_from_hf(
    folder: str | os.PathLike,
    tok: LoadedTokenizer,
    out: str | os.PathLike,
    *,
    pre: str | None = None,
    base: LoadedTokenizer | None = None,
    dtype: str = "f32",
) -> GgufWriteInfo:
    """A GGUF model file from a Hugging Face safetensors folder of the Llama architecture with the tokenizer
    `tok` (its pre-tokenizer named `pre`, or identified from `base`, the original tokenizer: see
    :func:`analysis.tokenizer.gguf_export.gguf_vocab`). 2-D tensors as `dtype`, norms as F32."""
    from safetensors import safe_open  # noqa: PLC0415 - loaded on use

    gguf = _gguf()
    if dtype not in DTYPES:
        raise DataError(f"unknown GGUF tensor type {dtype!r}; choose one of {', '.join(DTYPES)}")
    src = resolve_model(folder)
    if src.kind != "safetensors" or src.folder is None:
        raise DataError(f"{Path(folder).name}: not a Hugging Face safetensors folder")
    try:
        cfg = json.loads((src.folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{Path(folder).name}: no readable config.json ({e})") from e
    archs = cfg.get("architectures") or []
    if not any(a in HF_ARCHITECTURES for a in archs):
        raise DataError(
            f"{Path(folder).name}: architecture {archs or '?'} is not one this writer converts "
            f"({', '.join(HF_ARCHITECTURES)}); use llama.cpp's convert_hf_to_gguf.py"
        )
    n_layer, n_head = int(cfg["num_hidden_layers"]), int(cfg["num_attention_heads"])
    n_kv = int(cfg.get("num_key_value_heads") or n_head)
    hidden = int(cfg["hidden_size"])
    head_dim = int(cfg.get("head_dim") or hidden // n_head)
    theta = _rope_theta(cfg)
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, n_layer)
    tensor_names: list[tuple[Path, str]] = []
    for f in src.files:
        header, _ = read_safetensors_header(f)
        tensor_names += [(f, k) for k in header if k != "__metadata__"]
    embd = [
        k
        for _, k in tensor_names
        if name_map.get_name(k, try_suffixes=(".weight", ".bias")) == "token_embd.weight"
    ]
    if not embd:
        raise DataError(f"{Path(folder).name}: no input embedding tensor")
    tied = bool(cfg.get("tie_word_embeddings", False)) or not any(
        name_map.get_name(k, try_suffixes=(".weight",)) == "output.weight" for _, k in tensor_names
    )
    info = GgufWriteInfo(
        path=str(out), source="safetensors", architecture="llama", rows=0, tensors=0, copied=0
    )

    def tensor(f: Path, k: str) -> np.ndarray:
        with safe_open(str(f), framework="pt") as fh:
            return fh.get_tensor(k).float().numpy()

    def fill(writer: Any) -> None:
        rows = None
        for f, k in tensor_names:
            new = name_map.get_name(k, try_suffixes=(".weight", ".bias"))
            if new is None:
                if k.endswith("rotary_emb.inv_freq"):
                    continue
                raise DataError(f"{Path(folder).name}: tensor {k} has no llama.cpp name")
            if new.endswith("attn_rot_embd"):
                continue
            if new == "output.weight" and tied:
                continue
            a = tensor(f, k)
            if k.endswith("q_proj.weight"):
                a = _permute_rotary(a, n_head)
            elif k.endswith("k_proj.weight"):
                a = _permute_rotary(a, n_kv)
            if new == "token_embd.weight":
                rows = a.shape[0]
            if a.ndim >= 2 and dtype == "f16":
                a = a.astype(np.float16)
            else:
                a = a.astype(np.float32)
            writer.add_tensor(new, np.ascontiguousarray(a))
            info.tensors += 1
            if new in RESIZED:
                info.rewritten[new] = "F16" if a.dtype == np.float16 else "F32"
        if rows is None:  # pragma: no cover - guarded above
            raise DataError("no input embedding written")
        info.rows = int(rows)
        vocab = gguf_vocab(
            tok, pre=pre, base=base, n_rows=int(rows), chat_template=_folder_template(src.folder)
        )
        _special_ids_from_config(vocab, cfg, int(rows))
        info.vocab = vocab.to_json()
        writer.add_type(gguf.GGUFType.MODEL)
        writer.add_name(str(cfg.get("_name_or_path") or Path(folder).name)[:200])
        writer.add_context_length(int(cfg.get("max_position_embeddings") or 4096))
        writer.add_embedding_length(hidden)
        writer.add_block_count(n_layer)
        writer.add_feed_forward_length(int(cfg["intermediate_size"]))
        writer.add_head_count(n_head)
        writer.add_head_count_kv(n_kv)
        writer.add_rope_freq_base(theta)
        writer.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
        writer.add_rope_dimension_count(head_dim)
        if head_dim != hidden // n_head:
            writer.add_key_length(head_dim)
            writer.add_value_length(head_dim)
        writer.add_vocab_size(int(rows))
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32)
        add_vocab_to_writer(writer, vocab)

    info.bytes = _write_atomically(out, fill, "llama")
    return info


def _folder_template(folder: Path) -> str | None:
    """The chat template of an export folder: chat_template.jinja, else None (the inline one is read by
    :func:`gguf_vocab` from the tokenizer config)."""
    f = folder / "chat_template.jinja"
    try:
        return f.read_text(encoding="utf-8") if f.is_file() else None
    except (OSError, UnicodeDecodeError):
        return None


def _special_ids_from_config(vocab: GgufVocab, cfg: dict, rows: int) -> None:
    """Special ids the tokenizer config does not name, from config.json (`bos_token_id`, the first
    `eos_token_id`, `pad_token_id`, `unk_token_id`)."""
    for key, name in (("bos_token_id", "bos"), ("eos_token_id", "eos"), ("pad_token_id", "padding"),
                      ("unk_token_id", "unknown")):  # fmt: skip
        v = cfg.get(key)
        v = v[0] if isinstance(v, list) and v else v
        if name not in vocab.special_ids and isinstance(v, int) and not isinstance(v, bool) and 0 <= v < rows:
            vocab.special_ids[name] = v


def export_gguf(
    folder: str | os.PathLike,
    tok: LoadedTokenizer,
    *,
    model_source: str | os.PathLike | None = None,
    base: LoadedTokenizer | None = None,
    name: str | None = None,
    dtype: str = "f32",
) -> GgufWriteInfo | dict[str, Any]:
    """Write `<name>.gguf` (default: the folder's name) into an export folder, next to the Hugging Face files:
    with the folder's model weights when it has them — from the GGUF `model_source` when the model came from one
    (:func:`write_gguf_from_gguf`: the resized rows are the exported ones), else converted from the safetensors
    (:func:`write_gguf_from_hf`) — or vocabulary-only without a model. Returns what was written (a
    :class:`GgufWriteInfo`, or a dict for the vocabulary-only file)."""
    f = Path(folder)
    out = f / f"{name or f.resolve().name}.gguf"
    has_weights = any((f / n).is_file() for n in ("model.safetensors", "model.safetensors.index.json"))
    pre = base_gguf_pre(base)
    if not has_weights:
        write_vocab_gguf(tok, out, base=base, pre=pre)
        return {"file": out.name, "source": "vocab-only", "bytes": out.stat().st_size}
    if (
        model_source is not None
        and str(model_source).lower().endswith(".gguf")
        and Path(model_source).is_file()
    ):
        w = load_embeddings(resolve_model(f))
        return write_gguf_from_gguf(
            model_source,
            tok,
            out,
            input_rows=np.asarray(w.input.raw),
            output_rows=None if w.tied or w.output is None else np.asarray(w.output.raw),
            dtype=dtype,
        )
    return write_gguf_from_hf(f, tok, out, base=base, pre=pre, dtype=dtype)


def base_gguf_pre(base: LoadedTokenizer | None) -> str | None:
    """`tokenizer.ggml.pre` of the GGUF file `base` was loaded from (the base GGUF's own name), else None."""
    src = getattr(base, "source", None)
    if not src or not str(src).lower().endswith(".gguf") or not Path(src).is_file():
        return None
    try:
        v = read_gguf_header(
            src, {"tokenizer.ggml.pre"}, arrays=False, tensors=False, stop_when_found=1
        ).values
    except (OSError, TokenizerLoadError) as e:
        raise ModelLoadError(f"{Path(src).name}: not a readable GGUF file ({e})") from e
    pre = v.get("tokenizer.ggml.pre")
    return pre if isinstance(pre, str) and pre else None


# --------------------------------------------------------------------------------------------------
# llama.cpp vs Hugging Face log-probabilities
# --------------------------------------------------------------------------------------------------
@dataclass
class LogprobComparison:
    """Next-token log-probabilities of the GGUF model in llama.cpp vs the Hugging Face model, same ids."""

    tokens: int
    mean_abs_diff: float
    max_abs_diff: float
    top1_same: float
    expected: str = ""

    def to_json(self) -> dict:
        """JSON form."""
        return {
            "tokens": self.tokens,
            "mean_abs_diff": self.mean_abs_diff,
            "max_abs_diff": self.max_abs_diff,
            "top1_same": self.top1_same,
            "expected": self.expected,
        }


def hf_logprobs(model: Any, ids: list[int]) -> np.ndarray:
    """Next-token log-probabilities (float64, [len(ids), vocab]) of a Hugging Face causal LM on the CPU."""
    import torch  # noqa: PLC0415 - heavy, loaded on use

    with torch.no_grad():
        logits = model(torch.tensor([ids], dtype=torch.long)).logits[0].double()
    return torch.log_softmax(logits, dim=-1).numpy()


def compare_logprobs(
    hf_model: str | os.PathLike,
    gguf_path: str | os.PathLike,
    tok: LoadedTokenizer,
    text: str,
    *,
    max_tokens: int = 256,
    expected: str = "",
) -> LogprobComparison:
    """Encode `text` with `tok` (the ids both models see) and compare the next-token log-probabilities of the
    Hugging Face model `hf_model` and the GGUF model `gguf_path` in llama.cpp over the rows both have; the
    difference is over the whole distribution at every position. `expected` states the error to expect."""
    from .models import load_causal_lm  # noqa: PLC0415 - transformers, loaded on use

    ids = tok.tokenizer.encode(text, add_special_tokens=False).ids[:max_tokens]
    if len(ids) < 2:
        raise DataError("the text gives fewer than 2 tokens: nothing to compare")
    llm = open_gguf(gguf_path, vocab_only=False, n_ctx=max(512, len(ids) + 8))
    try:
        a = llama_logprobs(llm, ids)
    finally:
        llm.close()
    b = hf_logprobs(load_causal_lm(hf_model).model, ids)
    n = min(a.shape[1], b.shape[1])
    d = np.abs(a[:, :n] - b[:, :n])
    top1 = float(np.mean(a[:, :n].argmax(axis=1) == b[:, :n].argmax(axis=1)))
    return LogprobComparison(
        tokens=len(ids),
        mean_abs_diff=float(d.mean()),
        max_abs_diff=float(d.max()),
        top1_same=top1,
        expected=expected,
    )
