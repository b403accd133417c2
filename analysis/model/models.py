"""The one causal-LM loader: every page and command that needs a whole network (not only its embedding
matrices, see :mod:`analysis.model.weights`) loads it through :func:`load_causal_lm`.

* The source resolves as for the embedding readers (:func:`analysis.model.source.resolve_model`): a folder, a
  ``.safetensors`` / ``.gguf`` / ``.bin`` file, a weight index or a hub id.
* ``transformers.AutoModelForCausalLM.from_pretrained`` builds the network: safetensors when the source is
  safetensors, PyTorch ``.bin`` pickles only through ``torch.load(weights_only=True)``, GGUF de-quantized by
  transformers. Remote code is never run (``trust_remote_code=False``).
* `dtype` and `device` place a model on one device; `device_map` (e.g. ``"auto"``) and `max_memory` (e.g.
  ``{0: "70GiB", "cpu": "100GiB"}``) go to ``from_pretrained`` as they are, so accelerate spreads a big model
  over several devices (GPUs, then CPU memory, then an offload folder on disk).
* :func:`plan_placement` decides between the two: one device when the model fits it, else ``device_map="auto"``.
* A GGUF model is de-quantized once and kept in the disk cache as a safetensors folder
  (:func:`converted_gguf`): transformers' GGUF reader takes 15–45 s for the 135M-parameter demo model (it parses the
  metadata twice and rebuilds llama.cpp's tensor-name table for every module), the cached folder loads in 0.1 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safetensors import SafetensorError

from analysis.core.paths import cache_dir, cache_max_bytes
from analysis.errors import DataError, ModelLoadError

from .safetensors_file import read_safetensors_header
from .source import ModelSource, resolve_model

_CAUSAL_ARCH = re.compile(r"(CausalLM|LMHead)")


@dataclass
class CausalLM:
    """A loaded causal LM (in eval mode), where its inputs go, and what loading reported."""

    model: Any
    source: ModelSource
    #: the device of the input embeddings: where input ids must be sent
    device: str
    #: transformers' loading info: ``missing_keys``, ``unexpected_keys``, ``mismatched_keys``, …
    loading_info: dict[str, Any] = field(default_factory=dict)

    @property
    def missing_keys(self) -> list[str]:
        """Parameter names the checkpoint did not provide (initialised at random by transformers)."""
        return list(self.loading_info.get("missing_keys") or [])


def pick_device(device: str | None = None) -> str:
    """`device` if given, else CUDA when available, else CPU."""
    if device:
        return device
    import torch  # noqa: PLC0415 - heavy, only when a model is loaded

    return "cuda" if torch.cuda.is_available() else "cpu"


def cuda_available() -> bool:
    """Whether torch sees a CUDA device on this machine."""
    import torch  # noqa: PLC0415 - heavy, only when a device is chosen

    return bool(torch.cuda.is_available())


def architectures(src: ModelSource) -> list[str]:
    """The ``architectures`` named in the source's config.json (empty when there is none, or for GGUF)."""
    p = src.folder / "config.json"
    if src.kind == "gguf" or not p.is_file():
        return []
    try:
        cfg = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise ModelLoadError(
            f"{src.label}: config.json is not readable JSON ({type(e).__name__}: {e})"
        ) from e
    archs = cfg.get("architectures") if isinstance(cfg, dict) else None
    return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []


def load_causal_lm(
    source: str | os.PathLike | ModelSource,
    *,
    revision: str | None = None,
    token: str | None = None,
    dtype: Any = None,
    device: str | None = None,
    device_map: str | dict[str, Any] | None = None,
    max_memory: dict[Any, Any] | None = None,
) -> CausalLM:
    """Load a causal LM (never remote code); raises ModelLoadError for anything that is not one.

    `dtype` (a torch dtype; None = transformers' default) is the dtype of the parameters. Without a
    `device_map` the model is moved to `device` (None = stays on the CPU); with one, accelerate places it
    (`max_memory` caps each device) and :attr:`CausalLM.device` is where its input embeddings landed.
    """
    src = source if isinstance(source, ModelSource) else resolve_model(source, revision=revision, token=token)
    kwargs: dict[str, Any] = {"trust_remote_code": False, "output_loading_info": True, "weights_only": True}
    folder = src.folder
    converted = converted_gguf(src) if src.kind == "gguf" else None
    if converted is not None:
        folder, kwargs["use_safetensors"] = converted, True
    elif src.kind == "gguf":
        kwargs["gguf_file"] = src.gguf_file
    else:
        if not (src.folder / "config.json").is_file():
            raise ModelLoadError(f"{src.label}: no config.json next to the weights; cannot build the model")
        archs = " ".join(architectures(src))
        if archs and not _CAUSAL_ARCH.search(archs):
            raise ModelLoadError(f"{src.label} is a {archs}, not a causal LM with an LM head")
        kwargs["use_safetensors"] = src.kind == "safetensors"
    if dtype is not None:
        kwargs["dtype"] = dtype
    offload = None
    if device_map is not None:
        kwargs["device_map"] = device_map
        if max_memory is not None:
            kwargs["max_memory"] = dict(max_memory)  # transformers rewrites the dict it gets (sizes → bytes)
        # layers that fit neither a GPU nor the CPU cap go to disk: a private folder, removed with the model
        offload = tempfile.mkdtemp(prefix="toklab-offload-")
        kwargs["offload_folder"] = offload
    try:
        from transformers import AutoModelForCausalLM  # noqa: PLC0415 - heavy, only when a model is loaded

        model, info = AutoModelForCausalLM.from_pretrained(str(folder), **kwargs)
    except ModelLoadError:
        if offload:
            shutil.rmtree(offload, ignore_errors=True)
        raise
    except Exception as e:  # transformers raises many kinds (OSError, ValueError, pickling errors, …)
        if offload:
            shutil.rmtree(offload, ignore_errors=True)
        raise ModelLoadError(f"{src.label}: cannot load the model ({type(e).__name__}: {e})") from e
    if offload:
        weakref.finalize(model, shutil.rmtree, offload, True)
    if src.kind == "gguf" and converted is None:
        _drop_gguf_quantizer(model)
    elif converted is not None:
        # the GGUF's folder, as a direct load names it (never the cache folder)
        model.config._name_or_path = str(src.folder)
    model.eval()
    if device_map is None:
        if device:
            model.to(device)
        where = device or "cpu"
    else:
        where = str(model.get_input_embeddings().weight.device)
    return CausalLM(model, src, where, dict(info or {}))


_MEM_SPEC = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)\s*$", re.IGNORECASE)


def parse_max_memory(spec: str | None) -> dict[Any, str] | None:
    """``"0=20GiB,cpu=64GiB"`` → ``{0: "20GiB", "cpu": "64GiB"}`` (accelerate's `max_memory`); None/"" → None.

    Keys are GPU indices, ``cuda:N``, ``cpu`` or ``disk``; sizes need a unit (B, KB, MB, GB, TB, KiB … TiB).
    """
    if spec is None or not spec.strip():
        return None
    out: dict[Any, str] = {}
    for part in spec.split(","):
        key, sep, size = part.partition("=")
        key = key.strip().lower()
        if not sep or not _MEM_SPEC.match(size):
            raise DataError(
                f"max memory entry {part.strip()!r} is not DEVICE=SIZE with a unit (e.g. 0=20GiB)"
            )
        if key.startswith("cuda:"):
            key = key[5:]
        if key.isdigit():
            out[int(key)] = size.strip()
        elif key in ("cpu", "disk"):
            out[key] = size.strip()
        else:
            raise DataError(f"max memory device {key!r} must be a GPU index, cuda:N, cpu or disk")
    return out


_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1}


def parameter_bytes(src: ModelSource, bytes_per_param: int = 2) -> int:
    """Estimated memory of the model's parameters at `bytes_per_param` (2 for bf16).

    Exact for safetensors (element counts from the headers); for GGUF and PyTorch files an upper estimate
    from the file sizes (quantized GGUF blocks expand to at most ~4× their bytes in 16 bits).
    """
    if src.kind == "safetensors":
        n = 0
        for f in src.files:
            header, _ = read_safetensors_header(f)
            for name, t in header.items():
                if name == "__metadata__" or not isinstance(t, dict):
                    continue
                count = 1
                for d in t.get("shape") or []:
                    count *= int(d)
                n += count
        return n * bytes_per_param
    size = sum(f.stat().st_size for f in src.files)
    return size * 4 if src.kind == "gguf" else size * bytes_per_param // 4


@dataclass
class Placement:
    """Where a model goes: one `device`, or `device_map="auto"` with per-device `max_memory` caps."""

    device: str
    device_map: str | None
    max_memory: dict[Any, str] | None
    needed_bytes: int
    free_bytes: int | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record."""
        return {
            "device": self.device,
            "device_map": self.device_map,
            "max_memory": {str(k): v for k, v in (self.max_memory or {}).items()} or None,
            "needed_bytes": self.needed_bytes,
            "free_bytes": self.free_bytes,
            "reason": self.reason,
        }


def plan_placement(
    src: ModelSource,
    *,
    device: str | None = None,
    device_map: str | None = None,
    max_memory: dict[Any, str] | None = None,
    headroom: float = 1.2,
) -> Placement:
    """One device when the model (bf16 on CUDA, float32 on the CPU, × `headroom` for activations) fits its free
    memory; else ``device_map="auto"`` spreading it over every GPU, then the CPU (accelerate's offload).

    An explicit `device_map` or `max_memory` always gives ``device_map="auto"`` (or the map given).
    """
    import torch  # noqa: PLC0415 - heavy, only when a model is placed

    dev = pick_device(device)
    on_gpu = dev.startswith("cuda")
    if on_gpu and not torch.cuda.is_available():
        raise DataError(f"device {dev!r} asked for, but CUDA is not available on this machine")
    if not on_gpu and dev != "cpu":
        raise DataError(f"unknown device {dev!r} (cpu, cuda or cuda:N)")
    gpu_caps = [k for k in max_memory or {} if isinstance(k, int)]
    if gpu_caps and not torch.cuda.is_available():
        raise DataError(f"max memory names GPU {gpu_caps[0]}, but CUDA is not available on this machine")
    need = int(parameter_bytes(src, 2 if on_gpu else 4) * headroom)
    if device_map is not None or max_memory is not None:
        return Placement(dev, device_map or "auto", max_memory, need, None, "asked for")
    if not on_gpu:
        return Placement(dev, None, None, need, None, "CPU")
    index = torch.device(dev).index or 0
    free, _total = torch.cuda.mem_get_info(index)
    if need <= free:
        return Placement(dev, None, None, need, int(free), "fits one GPU")
    return Placement(dev, "auto", None, need, int(free), "larger than the free memory of one GPU")


def _converted_root() -> Path:
    return cache_dir() / "gguf-models"


def converted_gguf(src: ModelSource) -> Path | None:
    """The folder (config.json + model.safetensors, float32) of a GGUF model de-quantized by transformers, kept in
    the disk cache under the file's path, size and modification time; converted on first use (atomically: a
    second process converting the same file at the same time keeps the first folder). None when the
    de-quantized model would not fit the cache's size cap (``$TOKLAB_CACHE_MAX_MB``): it is then loaded from the
    GGUF file every time. The cache keeps the most recently used conversions within that cap.

    The cached folder holds exactly what transformers' GGUF loader gives (the same tensors, the same config without
    the quantizer), read back through safetensors (no pickle)."""
    if src.kind != "gguf" or parameter_bytes(src, 4) > cache_max_bytes():
        return None
    root = _converted_root()
    target = root / src.fingerprint()
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        try:
            os.utime(target)  # least recently *used* goes first
        except OSError:
            pass
        return target
    try:
        from transformers import AutoModelForCausalLM  # noqa: PLC0415 - heavy, only when a model is loaded

        model = AutoModelForCausalLM.from_pretrained(
            str(src.folder), gguf_file=src.gguf_file, trust_remote_code=False, weights_only=True
        )
    except Exception as e:  # transformers raises many kinds (OSError, ValueError, …)
        raise ModelLoadError(f"{src.label}: cannot load the model ({type(e).__name__}: {e})") from e
    _drop_gguf_quantizer(model)
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=root))
        try:
            model.save_pretrained(str(tmp), safe_serialization=True)
            os.replace(tmp, target)
        except (OSError, SafetensorError):  # safetensors' own I/O errors (a full disk) are not OSErrors
            if not (target / "model.safetensors").is_file():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except (OSError, SafetensorError):
        return None  # a full or read-only cache: load from the GGUF file itself
    finally:
        del model
    _trim_converted(keep=target)
    return target


def _trim_converted(keep: Path) -> None:
    """Remove the least recently used conversions until they fit the cache's size cap (`keep` stays)."""
    entries = []
    for d in _converted_root().iterdir():
        if d.name.startswith(".") or not d.is_dir():
            continue
        try:
            size = sum(f.stat().st_size for f in d.iterdir())
            entries.append((d.stat().st_mtime, size, d))
        except OSError:
            continue
    total = sum(size for _, size, _ in entries)
    for _, size, d in sorted(entries, key=lambda e: e[0]):
        if total <= cache_max_bytes():
            break
        if d != keep:
            shutil.rmtree(d, ignore_errors=True)
            total -= size


def _drop_gguf_quantizer(model: Any) -> None:
    """A GGUF checkpoint is de-quantized to float on load; forget the quantizer so the model can be saved."""
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    for attr in ("is_quantized", "_is_quantized"):
        if getattr(model, attr, False) is True:
            try:
                setattr(model, attr, False)
            except AttributeError:
                pass
    cfg = model.config
    if getattr(cfg, "quantization_config", None) is not None:
        try:
            del cfg.quantization_config
        except AttributeError:
            cfg.quantization_config = None
