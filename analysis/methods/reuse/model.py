"""The model follows an R-BPE tokenizer (:mod:`analysis.methods.reuse.reuse`): the rows of the reused ids are re-initialised.

Every id an R-BPE tokenizer emits is an id of the original model, so the embedding matrix keeps its size; but a
reused id now stands for a new target-language token. As in Hamdan, Al Mraikhat, Zaraket, "R-BPE: Improving
BPE-Tokenizers with Token Reuse" (EMNLP 2025, §7.5), the row of each reused id becomes the mean of the rows of
the new token's constituents under the ORIGINAL tokenizer (FVT, :mod:`analysis.adapt.fvt`: the token's string through
the original bare BPE model). The input embeddings, an untied LM head and its bias follow; tied weights stay tied;
every other row is untouched, so on text whose ids are not reused the hidden states are the original model's, and
so are the logits of every id that is not reused.

:func:`export_model` writes one folder: the model (safetensors + config, loadable with
``AutoModelForCausalLM.from_pretrained``), the R-BPE tokenizer (``old_tokenizer/``, ``new_tokenizer/``,
``rbpe_mapping.json`` with the id maps; :meth:`analysis.methods.reuse.reuse.ReuseTokenizer.load` reads the folder) and
``rbpe_model.json`` (what was re-initialised, from which pieces).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from analysis.adapt.embeddings import save_model
from analysis.adapt.fvt import fvt_pieces, fvt_rows
from analysis.adapt.vocab_map import EditedVocab, byte_lengths
from analysis.bpe import bare_tokenize_fn
from analysis.core.inputs import parse_json, read_file
from analysis.core.outputs import atomic_folder, atomic_write_text, strict_json
from analysis.errors import DataError, ModelLoadError
from analysis.model.models import load_causal_lm
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .reuse import MAPPING_FILE, ReuseTokenizer

MODEL_REPORT = "rbpe_model.json"


def reused_pieces(rt: ReuseTokenizer) -> dict[int, list[int]]:
    """Reused old id → the original tokenizer's ids of its new token (the rows FVT averages), in id order."""
    tokenize = bare_tokenize_fn(rt.old)
    vocab = {i: t for t, i in rt.new.get_vocab(with_added_tokens=True).items()}
    return {o: fvt_pieces(rt.old, vocab[rt.old_to_new[o]], tokenize=tokenize) for o in sorted(rt.reused_ids)}


def reinit_reused_rows(model: Any, rt: ReuseTokenizer) -> dict[str, Any]:
    """Re-initialise the reused ids' rows of `model` in place (FVT from the original rows); returns a report.

    Raises ModelLoadError when the model has fewer rows than the tokenizer's ids."""
    import torch  # noqa: PLC0415 - heavy, only when a model is edited

    emb = model.get_input_embeddings()
    if emb is None or not hasattr(emb, "weight"):
        raise ModelLoadError("the model has no input embedding matrix")
    weight = emb.weight
    n_rows = int(weight.shape[0])
    if max(rt.old.id_to_token) + 1 > n_rows:
        raise DataError(
            f"the tokenizer has ids up to {max(rt.old.id_to_token)} but the model only {n_rows} embedding rows; "
            "is this the model of the R-BPE tokenizer's original tokenizer?"
        )
    head = model.get_output_embeddings()
    has_head = head is not None and hasattr(head, "weight")
    tied = bool(has_head and head.weight.data_ptr() == weight.data_ptr())
    pieces = reused_pieces(rt)
    rows = list(pieces)
    used = sorted({i for p in pieces.values() for i in p if 0 <= i < n_rows})
    local = {i: k for k, i in enumerate(used)}
    plist = [[local[i] for i in p if i in local] for p in pieces.values()]
    # the piece rows (and the fallback means) are read before any row is written: FVT from the original rows
    mats = [weight] + ([head.weight] if has_head and not tied else [])
    bias = getattr(head, "bias", None) if has_head else None
    with torch.no_grad():
        idx = torch.as_tensor(rows, dtype=torch.long, device=weight.device)
        for w in mats:
            src = w[torch.as_tensor(used, dtype=torch.long, device=w.device)].clone()
            fallback = w.float().mean(0).to(w.dtype)
            w[idx.to(w.device)] = fvt_rows(src, plist, fallback)
        if bias is not None:
            src = bias[torch.as_tensor(used, dtype=torch.long, device=bias.device)].clone()
            bias[idx.to(bias.device)] = fvt_rows(src, plist, bias.float().mean().to(bias.dtype))
    return {
        "init": "fvt",
        "rows": n_rows,
        "reinitialised": len(rows),
        "no_pieces": sum(1 for p in plist if not p),
        "tied": tied,
        "has_lm_head": bool(has_head),
        "lm_head_bias": bias is not None,
        "pieces": {str(o): p for o, p in pieces.items()},
    }


def export_model(
    rt: ReuseTokenizer,
    source: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    replace: bool = False,
) -> dict[str, Any]:
    """Load the original model, re-initialise the reused rows and write model + R-BPE tokenizer to `out_dir`
    (atomically; a non-empty folder only with `replace`). Returns the model report (without the pieces)."""
    with atomic_folder(out_dir, replace=replace) as tmp:
        model = load_causal_lm(source).model
        rep = reinit_reused_rows(model, rt)
        rep["source"] = str(source)
        rep["vocab_size"] = int(model.config.vocab_size)
        save_model(model, tmp)
        for rel, data in rt.files().items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        atomic_write_text(tmp / MODEL_REPORT, strict_json(rep))
    summary = {k: v for k, v in rep.items() if k != "pieces"}
    summary["out"] = str(Path(out_dir).resolve())
    return summary


def read_model_report(folder: str | os.PathLike) -> dict[str, Any]:
    """The ``rbpe_model.json`` of an exported folder."""
    p = Path(folder) / MODEL_REPORT
    try:
        doc = parse_json(read_file(p), str(p))  # size cap, nesting guard, strict UTF-8
    except DataError as e:
        raise DataError(f"{p}: not a readable R-BPE model report ({e})") from None
    if not isinstance(doc, dict):
        raise DataError(f"{p}: not a readable R-BPE model report (a JSON object is expected)")
    return doc


def is_reuse_folder(folder: str | os.PathLike) -> bool:
    """Whether `folder` holds an R-BPE tokenizer (its id mapping), e.g. a model export of this method."""
    return (Path(folder) / MAPPING_FILE).is_file()


def model_check_vocab(rt: ReuseTokenizer) -> EditedVocab:
    """How the model check reads an R-BPE model against the original (:class:`analysis.adapt.vocab_map.EditedVocab`):
    every id keeps its number; a reused id is NEW (its row was re-initialised for a target-language token) and
    REMOVED (its old meaning is gone) at once; every other id means what it meant. Text is encoded the R-BPE way
    (target-script segments through the new tokenizer and the id map)."""
    old = rt.old
    reused = sorted(rt.reused_ids)
    top = max(old.id_to_token) + 1
    o2e = np.full(top, -1, dtype=np.int64)
    ids = np.fromiter(old.id_to_token, dtype=np.int64)
    o2e[ids] = ids
    o2e[reused] = -1
    new_tokens = {i: t for t, i in rt.new.get_vocab(with_added_tokens=False).items()}
    tokens = {o: new_tokens[rt.old_to_new[o]] for o in reused}
    byte_len = byte_lengths(old).copy()
    for o, t in tokens.items():
        byte_len[o] = len(old.token_bytes(t))
    return EditedVocab(f"R-BPE {old.name}", old, rt.encode_batch, o2e, reused, list(reused), byte_len, tokens)


def read_for_model_check(folder: Path, original: LoadedTokenizer) -> tuple[LoadedTokenizer, EditedVocab]:
    """The reader :func:`analysis.evaluate.model_check.load_pair` takes for an R-BPE model folder: (the old tokenizer,
    whose ids the model uses; the id correspondence). DataError when its old tokenizer is not `original`'s."""
    rt = ReuseTokenizer.load(folder)
    if rt.old.vocab != original.vocab:
        raise DataError(
            f"{folder}: the R-BPE tokenizer was built on another tokenizer than the original model's "
            f"({rt.old.name} vs {original.name})"
        )
    return rt.old, model_check_vocab(rt)
