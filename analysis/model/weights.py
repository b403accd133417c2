"""Read only the embedding matrices of a model checkpoint, without building the model.

Why one file (about 700 lines): the three checkpoint formats (safetensors with its own header parser, GGUF,
weights-only PyTorch) share the Matrix view (stored dtype, float32 blocks on demand) and the refusals of
unsafe or malformed files.

Supported: safetensors (single file or sharded with `model.safetensors.index.json`, memory-mapped through
our own header parser, so BF16/F8 work too), GGUF (the `gguf` package; only `token_embd`/`output` are
dequantized) and PyTorch `.bin`/`.pt` pickles (`torch.load(weights_only=True, mmap=True)`; pickles that
need unsafe loading are refused). Matrices stay in their stored dtype; float32 rows are produced on demand
in blocks (:meth:`Matrix.block`), so peak memory stays near the size of the matrices themselves.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.core.inputs import check_not_special, parse_json, path_error
from analysis.errors import ModelLoadError, TokenizerLoadError
from analysis.tokenizer.folders import load_folder
from analysis.tokenizer.gguf_file import GgufHeader, TensorInfo, read_gguf_header, tensor_array
from analysis.tokenizer.gguf_source import load_gguf
from analysis.tokenizer.hub import HUB_TOKENIZER_PATTERNS
from analysis.tokenizer.tokenizer import LoadedTokenizer

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

#: Storage dtypes we can turn into float32 rows.
_ST_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,  # converted by bit shift
    "F8_E4M3": np.uint8,  # converted through torch
    "F8_E5M2": np.uint8,
}
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth")


# --------------------------------------------------------------------------------------------------
# A matrix in its stored dtype
# --------------------------------------------------------------------------------------------------
class Matrix:
    """A 2-D weight matrix in its stored dtype (often memory-mapped); float32 rows on demand."""

    def __init__(self, raw: np.ndarray, dtype: str, name: str = "") -> None:
        if raw.ndim != 2:
            raise ModelLoadError(f"tensor {name!r} is not a matrix (shape {tuple(raw.shape)})")
        self.raw = raw
        self.dtype = dtype
        self.name = name

    def __repr__(self) -> str:
        return f"Matrix({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns)."""
        return (int(self.raw.shape[0]), int(self.raw.shape[1]))

    @property
    def nbytes(self) -> int:
        """Bytes of the stored matrix."""
        return int(self.raw.nbytes)

    def _to_f32(self, a: np.ndarray) -> np.ndarray:
        if self.dtype == "BF16":
            return (a.astype(np.uint32) << 16).view(np.float32)
        if self.dtype in ("F8_E4M3", "F8_E5M2"):
            import torch  # noqa: PLC0415 - heavy, loaded on use

            tdt = torch.float8_e4m3fn if self.dtype == "F8_E4M3" else torch.float8_e5m2
            return torch.from_numpy(np.ascontiguousarray(a)).view(tdt).float().numpy()
        return np.asarray(a, dtype=np.float32)

    def block(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) as a new float32 array."""
        out = self._to_f32(self.raw[start:stop])
        if np.may_share_memory(out, self.raw):  # float32 storage: a view, so copy (callers edit blocks)
            out = np.array(out, dtype=np.float32, copy=True)
        return out

    def take(self, ids: Any) -> np.ndarray:
        """The given rows as float32 (any order)."""
        ids = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.shape[0]):
            raise ModelLoadError(f"row ids out of range for {self.name} with {self.shape[0]} rows")
        return np.array(self._to_f32(self.raw[ids]), dtype=np.float32)

    def blocks(self, rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (start, float32 block) over all rows; blocks of about 64 MB by default."""
        n, d = self.shape
        rows = rows or max(1, (1 << 24) // max(1, d))
        for s in range(0, n, rows):
            yield s, self.block(s, min(n, s + rows))

    def to_numpy(self) -> np.ndarray:
        """The whole matrix as float32 (allocates rows × cols × 4 bytes)."""
        out = np.empty(self.shape, dtype=np.float32)
        for s, b in self.blocks():
            out[s : s + len(b)] = b
        return out

    def equals(self, other: Matrix) -> bool:
        """Whether two matrices hold the same values (compared block by block)."""
        if self.shape != other.shape:
            return False
        if self.raw is other.raw:
            return True
        for s, b in self.blocks():
            if not np.array_equal(b, other.block(s, s + len(b))):
                return False
        return True


@dataclass
class EmbeddingWeights:
    """The embedding matrices of one checkpoint, plus what we know about how they are used."""

    input: Matrix | None
    output: Matrix | None
    bias: np.ndarray | None
    tied: bool
    has_lm_head: bool
    format: str
    files: list[str]
    config: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def unembedding(self) -> Matrix:
        """The matrix the cosine/L2 indicators use: the LM head, else the input embeddings."""
        m = self.output if self.output is not None else self.input
        assert m is not None
        return m

    @property
    def n_rows(self) -> int:
        """Rows of the (un)embedding matrix."""
        return self.unembedding.shape[0]

    @property
    def dim(self) -> int:
        """Embedding width."""
        return self.unembedding.shape[1]

    def summary(self) -> dict[str, Any]:
        """JSON-friendly facts (shapes, dtypes, tied, files)."""
        return {
            "format": self.format,
            "files": self.files,
            "tied": self.tied,
            "has_lm_head": self.has_lm_head,
            "input": None
            if self.input is None
            else {"name": self.input.name, "shape": self.input.shape, "dtype": self.input.dtype},
            "output": None
            if self.output is None
            else {"name": self.output.name, "shape": self.output.shape, "dtype": self.output.dtype},
            "bias": self.bias is not None,
            "architectures": self.config.get("architectures"),
            "notes": self.notes,
        }


# --------------------------------------------------------------------------------------------------
# Model source resolution
# --------------------------------------------------------------------------------------------------
@dataclass
class ModelSource:
    """A resolved model location: the weight files and the folder holding config/tokenizer files."""

    label: str
    folder: Path
    kind: str  # "safetensors" | "gguf" | "pytorch"
    files: list[Path]
    index: Path | None = None

    @property
    def gguf_file(self) -> str | None:
        """The GGUF file name (relative to folder) for `from_pretrained(gguf_file=...)`."""
        return self.files[0].name if self.kind == "gguf" else None

    def fingerprint(self) -> str:
        """A cache key from every weight file's path, size and mtime."""
        h = hashlib.sha256()
        for p in self.files + ([self.index] if self.index else []):
            st = p.stat()
            h.update(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        return h.hexdigest()[:16]


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def resolve_model(
    source: str | os.PathLike, *, revision: str | None = None, token: str | None = None
) -> ModelSource:
    """Find the weight files of a folder, a weight file, or a hub id (downloaded or from the local cache).

    `hub:owner/name` always means the hub, even when a local folder of that name exists.
    """
    s = str(source).strip()
    if not s:
        raise ModelLoadError("no model given: enter a folder, a .safetensors/.gguf/.bin file or a hub id")
    if s.startswith("hub:"):  # a hub id that must never be read as a local path (ids typed in the browser)
        s = s[4:].strip()
        if not _HUB_ID.match(s):
            raise ModelLoadError(f"not a hub id (owner/name): {s}")
        return _resolve_hub(s, revision=revision, token=token)
    p = check_not_special(os.path.expanduser(s), ModelLoadError)
    try:
        is_file, is_dir = p.is_file(), p.is_dir()
    except OSError as e:
        raise ModelLoadError(path_error(p, e)) from e
    if is_file:
        return _resolve_file(p)
    if is_dir:
        return _resolve_folder(p)
    if s.startswith(("/", ".", "~")) or not _HUB_ID.match(s):
        raise ModelLoadError(f"no such file or folder, and not a hub id: {s}")
    return _resolve_hub(s, revision=revision, token=token)


def _resolve_file(p: Path) -> ModelSource:
    name = p.name
    if name.endswith(".index.json"):
        kind = "safetensors" if "safetensors" in name else "pytorch"
        return ModelSource(str(p), p.parent, kind, _shards_from_index(p), index=p)
    if name.endswith(".gguf"):
        return ModelSource(str(p), p.parent, "gguf", [p])
    if name.endswith(".safetensors"):
        return ModelSource(str(p), p.parent, "safetensors", [p])
    if name.endswith((".bin", ".pt", ".pth")):
        return ModelSource(str(p), p.parent, "pytorch", [p])
    raise ModelLoadError(
        f"{p.name}: not a weight file (expected .safetensors, .gguf, .bin, .pt or an index.json)"
    )


def _resolve_folder(folder: Path) -> ModelSource:
    for idx in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / idx).is_file():
            return _resolve_file(folder / idx)
    for pattern in (
        "model.safetensors",
        "*.safetensors",
        "pytorch_model.bin",
        "*.bin",
        "*.pt",
        "*.pth",
        "*.gguf",
    ):
        found = sorted(q for q in folder.glob(pattern) if q.is_file() and "training_args" not in q.name)
        if found:
            if pattern == "*.safetensors" and len(found) > 1:
                return ModelSource(str(folder), folder, "safetensors", found)
            return _resolve_file(found[0])
    raise ModelLoadError(
        f"{folder} holds no model weights (looked for *.safetensors, a safetensors/bin index, "
        "pytorch_model.bin, *.pt, *.gguf)"
    )


def _shards_from_index(index: Path) -> list[Path]:
    """The shard files a weight index names: each a file in the index's own folder (a name that leaves the folder
    — absolute, `..`, or a link pointing out — is refused, so an uploaded index cannot read other server files)."""
    try:
        wm = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        names = list(dict.fromkeys(wm.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ModelLoadError(f"{index.name}: not a valid weight index ({type(e).__name__})") from e
    folder = index.parent.resolve()
    files = []
    for f in names:
        if not isinstance(f, str) or not f or Path(f).is_absolute() or ".." in Path(f).parts:
            raise ModelLoadError(f"{index.name} names shard {f!r}, which is not a file name in its folder")
        q = index.parent / f
        if not q.is_file():
            raise ModelLoadError(f"{index.name} names shard {f}, which is missing")
        if not q.resolve().is_relative_to(folder):
            raise ModelLoadError(f"{index.name} names shard {f}, which links outside its folder")
        files.append(q)
    return files


def _resolve_hub(repo_id: str, *, revision: str | None, token: str | None) -> ModelSource:
    try:
        from huggingface_hub import errors as hf_errors  # noqa: PLC0415 - heavy, loaded on use
        from huggingface_hub import snapshot_download  # noqa: PLC0415 - heavy, loaded on use
    except ImportError as e:  # pragma: no cover
        raise ModelLoadError("huggingface_hub is not installed") from e
    base = ["config.json", "generation_config.json", *HUB_TOKENIZER_PATTERNS]
    last: Exception | None = None
    for weights in (
        ["model.safetensors", "model.safetensors.index.json", "model-*.safetensors"],
        ["pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"],
    ):
        try:
            folder = snapshot_download(
                repo_id, revision=revision, token=token or None, allow_patterns=base + weights
            )
        except hf_errors.GatedRepoError as e:
            raise ModelLoadError(
                f"{repo_id} is gated: accept its license on the hub and give an access token"
            ) from e
        except hf_errors.RepositoryNotFoundError as e:
            raise ModelLoadError(f"{repo_id}: no such repository on the hub (or it is private)") from e
        except hf_errors.RevisionNotFoundError as e:
            raise ModelLoadError(f"{repo_id}: revision {revision!r} does not exist") from e
        except hf_errors.LocalEntryNotFoundError as e:
            raise ModelLoadError(
                f"{repo_id}: not in the local Hugging Face cache and the hub cannot be reached (offline); "
                "give a local folder or file instead"
            ) from e
        except (hf_errors.HfHubHTTPError, OSError, ValueError) as e:
            last = e
            continue
        try:
            src = _resolve_folder(Path(folder))
            src.label = repo_id
            return src
        except ModelLoadError as e:
            last = e
    raise ModelLoadError(f"{repo_id}: no safetensors or PyTorch weights found ({last})")


# --------------------------------------------------------------------------------------------------
# safetensors (own header parser + memory map)
# --------------------------------------------------------------------------------------------------
#: bytes per element of the safetensors dtypes (for checking headers; only _ST_DTYPES are read)
_ST_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip


def read_safetensors_header(path: Path) -> tuple[dict, int]:
    """The JSON header of a safetensors file and the byte offset where its data starts.

    Every tensor entry is checked before anything is mapped: a dtype string, a shape of non-negative integers,
    data offsets `[begin, end]` with `0 ≤ begin ≤ end` inside the file, and `end - begin` equal to the shape's
    size for known dtypes. A malformed header is a ModelLoadError naming the tensor, never an exception later.
    """
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ModelLoadError(f"{path.name}: too short to be a safetensors file")
            (n,) = struct.unpack("<Q", head)
            if n <= 0 or n > min(size - 8, 100 * 1024 * 1024):
                raise ModelLoadError(f"{path.name}: corrupt safetensors header (length {n})")
            header = parse_json(f.read(n), f"{path.name} (corrupt safetensors header)", ModelLoadError)
    except OSError as e:
        raise ModelLoadError(f"cannot read {path}: {e.strerror}") from e
    if not isinstance(header, dict):
        raise ModelLoadError(f"{path.name}: corrupt safetensors header (not an object)")
    header.pop("__metadata__", None)
    data_size = size - 8 - n
    for name, info in header.items():
        _check_tensor_entry(path.name, name, info, data_size)
    return header, 8 + n


def _check_tensor_entry(file: str, name: str, info: Any, data_size: int) -> None:
    """One safetensors header entry, checked (see :func:`read_safetensors_header`)."""
    bad = f"{file}: corrupt safetensors header: tensor {name!r}"
    if not isinstance(info, dict):
        raise ModelLoadError(f"{bad} is not an object")
    dt, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dt, str):
        raise ModelLoadError(f"{bad} has no dtype")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise ModelLoadError(
            f"{bad} has an invalid shape {shape!r} (dimensions must be non-negative integers)"
        )
    if (
        not isinstance(offs, list)
        or len(offs) != 2
        or not all(type(o) is int for o in offs)
        or not 0 <= offs[0] <= offs[1]
    ):
        raise ModelLoadError(f"{bad} has invalid data offsets {offs!r}")
    if offs[1] > data_size:
        raise ModelLoadError(f"{bad} lies past the end of the file (truncated or corrupt)")
    item = _ST_ITEMSIZE.get(dt)
    if item is not None and math.prod(shape) * item != offs[1] - offs[0]:
        raise ModelLoadError(f"{bad}: its shape {shape} does not match its {offs[1] - offs[0]:,} bytes")


def _safetensors_matrix(path: Path, header: dict, data_start: int, name: str) -> Matrix:
    info = header[name]
    dt, shape, (b, e) = info.get("dtype"), info.get("shape"), info.get("data_offsets", (0, 0))
    if dt not in _ST_DTYPES:
        raise ModelLoadError(f"{path.name}: tensor {name} has unsupported dtype {dt}")
    np_dt = np.dtype(_ST_DTYPES[dt])
    if not isinstance(shape, list) or len(shape) != 2:
        raise ModelLoadError(f"{path.name}: tensor {name} is not a matrix (shape {shape})")
    nbytes = int(np.prod(shape)) * np_dt.itemsize
    size = path.stat().st_size
    if e - b != nbytes or data_start + e > size:
        raise ModelLoadError(f"{path.name}: tensor {name} lies outside the file (truncated or corrupt)")
    mm = np.memmap(path, dtype=np_dt, mode="r", offset=data_start + b, shape=tuple(shape))
    return Matrix(mm, dt, name)


def _safetensors_vector(path: Path, header: dict, data_start: int, name: str) -> np.ndarray:
    info = header[name]
    dt, (b, e) = info.get("dtype"), info.get("data_offsets", (0, 0))
    if dt not in _ST_DTYPES:
        raise ModelLoadError(f"{path.name}: tensor {name} has unsupported dtype {dt}")
    raw = np.memmap(
        path,
        dtype=np.dtype(_ST_DTYPES[dt]),
        mode="r",
        offset=data_start + b,
        shape=((e - b) // np.dtype(_ST_DTYPES[dt]).itemsize,),
    )
    return Matrix(raw.reshape(1, -1), dt, name).block(0, 1)[0]


# --------------------------------------------------------------------------------------------------
# Choosing tensors by name
# --------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------
# Loaders
# --------------------------------------------------------------------------------------------------
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
        _safetensors_matrix(where[in_name][0], where[in_name][1], where[in_name][2], in_name)
        if in_name
        else None
    )
    out = (
        _safetensors_matrix(where[out_name][0], where[out_name][1], where[out_name][2], out_name)
        if out_name
        else None
    )
    bias = _safetensors_vector(*where[b_name], b_name) if b_name else None
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


# --------------------------------------------------------------------------------------------------
# Tokenizer of a model
# --------------------------------------------------------------------------------------------------
def tokenizer_for_model(src: ModelSource) -> LoadedTokenizer:
    """The tokenizer that belongs to a model: its folder's tokenizer files, or the one inside a GGUF."""
    if src.kind == "gguf":
        try:
            return load_folder(src.folder)
        except TokenizerLoadError:
            return load_gguf(src.files[0])
    try:
        return load_folder(src.folder)
    except TokenizerLoadError as e:
        raise ModelLoadError(
            f"{src.label}: no tokenizer files next to the weights; give --tokenizer ({e})"
        ) from e
