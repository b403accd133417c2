"""The one causal-LM loader: every page and command that needs a whole network (not only its embedding
matrices, see :mod:`analysis.weights`) loads it through :func:`load_causal_lm`.

* The source resolves as for the embedding readers (:func:`analysis.weights.resolve_model`): a folder, a
  ``.safetensors`` / ``.gguf`` / ``.bin`` file, a weight index or a hub id.
* ``transformers.AutoModelForCausalLM.from_pretrained`` builds the network: safetensors when the source is
  safetensors, PyTorch ``.bin`` pickles only through ``torch.load(weights_only=True)``, GGUF de-quantized by
  transformers. Remote code is never run (``trust_remote_code=False``).
* `dtype` and `device` place a model on one device; `device_map` (e.g. ``"auto"``) and `max_memory` (e.g.
  ``{0: "70GiB", "cpu": "100GiB"}``) go to ``from_pretrained`` as they are, so accelerate spreads a big model
  over several devices.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import ModelLoadError
from .weights import ModelSource, resolve_model

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
    if src.kind == "gguf":
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
    if device_map is not None:
        kwargs["device_map"] = device_map
        if max_memory is not None:
            kwargs["max_memory"] = dict(max_memory)  # transformers rewrites the dict it gets (sizes → bytes)
    try:
        from transformers import AutoModelForCausalLM  # noqa: PLC0415 - heavy, only when a model is loaded

        model, info = AutoModelForCausalLM.from_pretrained(str(src.folder), **kwargs)
    except ModelLoadError:
        raise
    except Exception as e:  # transformers raises many kinds (OSError, ValueError, pickling errors, …)
        raise ModelLoadError(f"{src.label}: cannot load the model ({type(e).__name__}: {e})") from e
    if src.kind == "gguf":
        _drop_gguf_quantizer(model)
    model.eval()
    if device_map is None:
        if device:
            model.to(device)
        where = device or "cpu"
    else:
        where = str(model.get_input_embeddings().weight.device)
    return CausalLM(model, src, where, dict(info or {}))


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
