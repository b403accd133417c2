"""Read only the embedding matrices of a model checkpoint, without building the model.

This module chooses the tensors by name and reads them from the three checkpoint formats; beside it:
:mod:`.source` (where a model's files are: :func:`~analysis.model.source.resolve_model`), :mod:`.matrix` (the
stored-dtype :class:`~analysis.model.matrix.Matrix` view) and :mod:`.safetensors_file` (our safetensors reader).

Supported: safetensors (single file or sharded with `model.safetensors.index.json`, memory-mapped through
our own header parser, so BF16/F8 work too), GGUF (the `gguf` package; only `token_embd`/`output` are
dequantized) and PyTorch `.bin`/`.pt` pickles (`torch.load(weights_only=True, mmap=True)`; pickles that
need unsafe loading are refused). Matrices stay in their stored dtype; float32 rows are produced on demand
in blocks (:meth:`Matrix.block`), so peak memory stays near the size of the matrices themselves.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import ModelLoadError, TokenizerLoadError
from analysis.tokenizer.gguf_file import GgufHeader, TensorInfo, read_gguf_header, tensor_array

from .matrix import EmbeddingWeights, Matrix
from .safetensors_file import read_safetensors_header, safetensors_matrix, safetensors_vector
from .source import ModelSource, resolve_model

#: Names of the input embedding tensor, most specific first (HF, original Llama, NeoX, T5, GGUF).
INPUT_NAMES = (
    "model.embed_tokens.weight",
    "model.language_model.embed_tokens.weight",
    "language_model.model.embed_tokens.weight",
    "transformer.wte.weight",
    "wte.weight",
    "gpt_neox.embed_in.weight",
    "embed_in.weight",
    "transformer.word_embeddings.weight",
    "model.decoder.embed_tokens.weight",
    "embeddings.word_embeddings.weight",
    "bert.embeddings.word_embeddings.weight",
    "roberta.embeddings.word_embeddings.weight",
    "model.transformer.wte.weight",
    "transformer.wte.embedding.weight",  # OLMo-1
    "tok_embeddings.weight",
    "shared.weight",
    "embed_tokens.weight",
    "token_embd.weight",
)
#: Names of the output embedding (LM head / unembedding) tensor.
OUTPUT_NAMES = (
    "lm_head.weight",
    "model.lm_head.weight",
    "language_model.lm_head.weight",
    "embed_out.weight",
    "transformer.ff_out.weight",  # OLMo-1 (untied)
    "model.transformer.ff_out.weight",
    "output.weight",
    "cls.predictions.decoder.weight",
)
#: Names of an output bias.
BIAS_NAMES = (
    "lm_head.bias",
    "embed_out.bias",
    "final_logits_bias",
    "cls.predictions.bias",
    "cls.predictions.decoder.bias",
    "output.bias",
)
_EMBED_HINT = re.compile(r"(embed|wte|word_emb|tok_emb|token_embd|shared)", re.I)
_NOT_TOKEN_EMBED = re.compile(r"(position|pos_emb|wpe|token_type|segment|rotary|norm)", re.I)


def _pick(names: dict[str, tuple], candidates: tuple[str, ...]) -> str | None:
    for c in candidates:
        if c in names:
            return c
    # prefixed forms (e.g. "model.model.embed_tokens.weight", "base_model.…")
    for c in candidates:
        for n in names:
            if n.endswith("." + c):
                return n
    return None


def _pick_input(shapes: dict[str, tuple], min_rows: int | None) -> str | None:
    name = _pick(shapes, INPUT_NAMES)
    if name and len(shapes[name]) == 2:
        return name
    # fallback: the largest 2-D embedding-like tensor (magikarp: the one embedding with rows >= vocab)
    cands = [
        n
        for n, s in shapes.items()
        if len(s) == 2 and _EMBED_HINT.search(n) and not _NOT_TOKEN_EMBED.search(n)
    ]
    if min_rows:
        cands = [n for n in cands if shapes[n][0] >= min_rows]
    if not cands:
        return None
    return max(cands, key=lambda n: shapes[n][0])


def _read_config(folder: Path) -> dict:
    p = folder / "config.json"
    if not p.is_file():
        return {}
    try:
        cfg = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return cfg if isinstance(cfg, dict) else {}


def _tie_flag(config: dict) -> bool | None:
    for c in (config, config.get("text_config") or {}):
        if isinstance(c, dict) and "tie_word_embeddings" in c:
            return bool(c["tie_word_embeddings"])
    return None


def _finish(
    inp: Matrix | None,
    out: Matrix | None,
    bias: np.ndarray | None,
    fmt: str,
    files: list[str],
    config: dict,
    notes: list[str],
) -> EmbeddingWeights:
    if inp is None and out is None:
        raise ModelLoadError(f"no token embedding matrix found in {', '.join(Path(f).name for f in files)}")
    flag = _tie_flag(config)
    if out is None:
        # No separate head: either tied (decoder LMs that tie by default) or an encoder without an LM head.
        archs = " ".join(config.get("architectures") or [])
        is_lm = (
            bool(re.search(r"(CausalLM|LMHead|ForConditionalGeneration|ForMaskedLM)", archs)) or fmt == "gguf"
        )
        tied = flag is not False
        if not is_lm:
            notes.append(
                f"no LM head in the checkpoint (architecture {archs or 'unknown'}): "
                "indicators use the input embeddings; verification is not possible"
            )
        elif flag is False:
            notes.append("config says the embeddings are untied, but the checkpoint has no LM head tensor")
        return EmbeddingWeights(
            inp,
            None,
            bias,
            tied=tied,
            has_lm_head=is_lm and tied,
            format=fmt,
            files=files,
            config=config,
            notes=notes,
        )
    if inp is None:
        notes.append("no input embeddings found: only output-embedding indicators are available")
        return EmbeddingWeights(
            None, out, bias, tied=False, has_lm_head=True, format=fmt, files=files, config=config, notes=notes
        )
    if flag is True and inp.equals(out):
        notes.append("the checkpoint stores the tied LM head separately (identical to the embeddings)")
        return EmbeddingWeights(
            inp, None, bias, tied=True, has_lm_head=True, format=fmt, files=files, config=config, notes=notes
        )
    if flag is True:
        notes.append("config says tie_word_embeddings, but the stored LM head differs: treated as untied")
    return EmbeddingWeights(
        inp, out, bias, tied=False, has_lm_head=True, format=fmt, files=files, config=config, notes=notes
    )


def _bias_ok(b: np.ndarray | None, notes: list[str]) -> np.ndarray | None:
    if b is None:
        return None
    if float(np.linalg.norm(b.astype(np.float64))) <= 1e-3:
        notes.append("the output bias is ~0 and is ignored")
        return None
    return b.astype(np.float32)


def load_embeddings(
    source: str | os.PathLike | ModelSource, *, vocab_size: int | None = None
) -> EmbeddingWeights:
    """Read the input/output embeddings (and output bias) of a model without building it."""
    src = source if isinstance(source, ModelSource) else resolve_model(source)
    if src.kind == "safetensors":
        return _load_safetensors(src, vocab_size)
    if src.kind == "gguf":
        return _load_gguf(src)
    return _load_pytorch(src, vocab_size)


def _load_safetensors(src: ModelSource, vocab_size: int | None) -> EmbeddingWeights:
    where: dict[str, tuple[Path, dict, int]] = {}
    shapes: dict[str, tuple] = {}
    for f in src.files:
        header, start = read_safetensors_header(f)
        for n, info in header.items():
            if isinstance(info, dict):
                where[n] = (f, header, start)
                shapes[n] = tuple(info.get("shape") or ())
    notes: list[str] = []
    in_name = _pick_input(shapes, vocab_size)
    out_name = _pick({n: s for n, s in shapes.items() if len(s) == 2}, OUTPUT_NAMES)
    if out_name == in_name:
        out_name = None
    b_name = _pick({n: s for n, s in shapes.items() if len(s) == 1}, BIAS_NAMES)
    inp = (
        safetensors_matrix(where[in_name][0], where[in_name][1], where[in_name][2], in_name)
        if in_name
        else None
    )
    out = (
        safetensors_matrix(where[out_name][0], where[out_name][1], where[out_name][2], out_name)
        if out_name
        else None
    )
    bias = safetensors_vector(*where[b_name], b_name) if b_name else None
    files = sorted({str(where[n][0]) for n in (in_name, out_name, b_name) if n})
    return _finish(
        inp,
        out,
        _bias_ok(bias, notes),
        "safetensors",
        files or [str(f) for f in src.files],
        _read_config(src.folder),
        notes,
    )


#: The GGUF metadata `gguf_config` reads (the token list is only counted)
_GGUF_CONFIG_KEYS = frozenset(
    {"general.architecture"}
    | {
        f"tokenizer.ggml.{k}"
        for k in ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id")
    }  # fmt: skip
)


def _load_gguf(src: ModelSource) -> EmbeddingWeights:
    """The embeddings of a GGUF file: its header read by :mod:`analysis.tokenizer.gguf_file` (no gguf-py reader,
    which parses the whole vocabulary first: 2.5 s on SmolLM2), each matrix dequantized from a memory map."""
    try:
        import gguf  # noqa: PLC0415 - heavy, loaded on use
    except ImportError as e:  # pragma: no cover
        raise ModelLoadError("the `gguf` package is needed to read .gguf files") from e
    path = src.files[0]
    try:
        head = read_gguf_header(path, _GGUF_CONFIG_KEYS, counted={"tokenizer.ggml.tokens"})
        tensors = {t.name: t for t in head.tensors}
        notes: list[str] = []
        inp = (
            _gguf_matrix(gguf, path, head, tensors["token_embd.weight"])
            if "token_embd.weight" in tensors
            else None
        )
        out = _gguf_matrix(gguf, path, head, tensors["output.weight"]) if "output.weight" in tensors else None
    except (OSError, TokenizerLoadError, ValueError) as e:
        raise ModelLoadError(f"{path.name}: not a readable GGUF file ({e.__class__.__name__}: {e})") from e
    config = gguf_config(head)
    if out is None:
        config.setdefault("tie_word_embeddings", True)
    return _finish(inp, out, None, "gguf", [str(path)], config, notes)


def _gguf_matrix(gguf: Any, path: Path, head: GgufHeader, t: TensorInfo) -> Matrix:
    """Dequantize one GGUF tensor block by block into float32 (or keep F16/F32 as stored)."""
    try:
        qt = gguf.GGMLQuantizationType(t.type)
    except ValueError as e:
        raise ModelLoadError(f"{t.name}: unknown GGUF tensor type {t.type}") from e
    if len(t.shape) != 2:
        raise ModelLoadError(f"{t.name}: a {len(t.shape)}-D tensor, not a matrix")
    if qt in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
        dtype = np.float32 if qt == gguf.GGMLQuantizationType.F32 else np.float16
        return Matrix(tensor_array(path, head, t, None, dtype), qt.name, t.name)
    data = tensor_array(path, head, t, gguf.GGML_QUANT_SIZES[qt], None)  # (rows, bytes per row) uint8
    rows, cols = data.shape[0], t.shape[0]
    out = np.empty((rows, cols), dtype=np.float32)
    step = max(1, (1 << 22) // max(1, cols))
    try:
        for s in range(0, rows, step):
            out[s : s + step] = gguf.quants.dequantize(data[s : s + step], qt).reshape(-1, cols)
    except Exception as e:
        raise ModelLoadError(f"cannot dequantize {t.name} ({qt.name}): {e}") from e
    return Matrix(out, "F32", t.name)


def gguf_config(head: GgufHeader) -> dict:
    """A small config dict from GGUF metadata (architecture, vocab size, special ids)."""
    arch = head.values.get("general.architecture") or ""
    arch = arch if isinstance(arch, str) else ""
    cfg: dict[str, Any] = {"gguf_architecture": arch, "architectures": [f"{arch}(GGUF)ForCausalLM"]}
    if "tokenizer.ggml.tokens" in head.counts:
        cfg["vocab_size"] = head.counts["tokenizer.ggml.tokens"]
    for k in ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id"):
        v = head.values.get(f"tokenizer.ggml.{k}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            cfg[k] = v
    return cfg


def _load_pytorch(src: ModelSource, vocab_size: int | None) -> EmbeddingWeights:
    import torch  # noqa: PLC0415 - heavy, loaded on use

    tensors: dict[str, Any] = {}
    for f in src.files:
        tensors.update(_torch_load(f, torch))
    shapes = {n: tuple(t.shape) for n, t in tensors.items() if hasattr(t, "shape")}
    notes: list[str] = []
    in_name = _pick_input(shapes, vocab_size)
    out_name = _pick({n: s for n, s in shapes.items() if len(s) == 2}, OUTPUT_NAMES)
    if out_name == in_name:
        out_name = None
    b_name = _pick({n: s for n, s in shapes.items() if len(s) == 1}, BIAS_NAMES)
    inp = _torch_matrix(tensors[in_name], in_name, torch) if in_name else None
    out = _torch_matrix(tensors[out_name], out_name, torch) if out_name else None
    bias = _torch_matrix(tensors[b_name].reshape(1, -1), b_name, torch).block(0, 1)[0] if b_name else None
    tensors.clear()
    return _finish(
        inp,
        out,
        _bias_ok(bias, notes),
        "pytorch",
        [str(f) for f in src.files],
        _read_config(src.folder),
        notes,
    )


def _torch_load(path: Path, torch: Any) -> dict:
    try:
        try:
            sd = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as e:
            if "mmap" not in str(e):
                raise
            sd = torch.load(str(path), map_location="cpu", weights_only=True)  # legacy (non-zip) format
    except Exception as e:
        msg = str(e)
        if "Weights only load failed" in msg or "weights_only" in msg or "Unsupported global" in msg:
            raise ModelLoadError(
                f"{path.name}: this pickle needs unsafe loading (arbitrary code); refused. "
                "Convert it to safetensors or give a trusted weights-only file."
            ) from e
        raise ModelLoadError(
            f"{path.name}: not a readable PyTorch checkpoint ({e.__class__.__name__}: {e})"
        ) from e
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    if not isinstance(sd, dict):
        raise ModelLoadError(f"{path.name}: not a state dict (got {type(sd).__name__})")
    return {k: v for k, v in sd.items() if isinstance(k, str) and isinstance(v, torch.Tensor)}


def _torch_matrix(t: Any, name: str, torch: Any) -> Matrix:
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return Matrix(t.view(torch.int16).numpy().view(np.uint16), "BF16", name)
    if t.dtype == torch.float16:
        return Matrix(t.numpy(), "F16", name)
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return Matrix(
            t.view(torch.uint8).numpy(), "F8_E4M3" if t.dtype == torch.float8_e4m3fn else "F8_E5M2", name
        )
    if t.dtype == torch.float64:
        return Matrix(t.numpy(), "F64", name)
    return Matrix(t.float().numpy(), "F32", name)
