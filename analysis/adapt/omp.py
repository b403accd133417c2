"""Orthogonal matching pursuit (OMP) init of new rows: each new token as a sparse combination of `k` existing
tokens (after Goddard & Fernandes Neto, "Training-Free Tokenizer Transplantation via Orthogonal Matching
Pursuit", 2025).

In the paper a donor model holds both the new token and the shared anchor tokens in one space: OMP codes the new
token's donor vector over the anchors' donor vectors, and the same coefficients applied to the anchors' rows of the
base model give the new row. An extension has no second model, so the original model is its own donor through
its multi-token reading (:func:`hidden_space_rows`): the shared space is a middle layer's hidden state — of an
anchor read alone after the prefix token, and of the new token read as its pieces under the original tokenizer
(at the last piece). The coefficients found there are applied to the anchors' input rows (and output rows of an
untied head). Anchors are the first `anchors` ids of the original vocabulary (BPE ids follow merge order, so
these are the most frequent units), special tokens excluded.

:func:`omp` is a batched, deterministic implementation (greedy atom choice by the largest absolute correlation
with the residual, then a least-squares refit on the chosen atoms), in torch, float64.
"""

from __future__ import annotations

from typing import Any

from analysis.errors import DataError

#: Atoms per new token (the paper sweeps k; 8 is a small, common choice).
DEFAULT_K = 8
#: Anchor tokens: the first ids of the original vocabulary.
DEFAULT_ANCHORS = 8192


def omp(dictionary: Any, targets: Any, k: int = DEFAULT_K, *, exclude: Any = None) -> tuple[Any, Any]:
    """Sparse codes of `targets` (m × d) over the rows of `dictionary` (n × d): returns (indices m × k, long;
    coefficients m × k, float32) with ``targets[i] ≈ coefficients[i] @ dictionary[indices[i]]``.

    Each step picks the atom whose normalised row has the largest |correlation| with the residual (an atom is
    never picked twice), then refits all chosen coefficients by least squares. `exclude` (a bool tensor of n)
    marks rows that may never be chosen. Zero rows are never chosen. Torch tensors in, torch tensors out.
    """
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    d_mat = dictionary.detach().double()
    y = targets.detach().double()
    n, dim = d_mat.shape
    if y.ndim != 2 or y.shape[1] != dim:
        raise DataError(f"OMP targets must be m × {dim}, not {tuple(y.shape)}")
    if not 1 <= k <= n:
        raise DataError(f"OMP needs 1 ≤ k ≤ {n} atoms, not {k}")
    norms = d_mat.norm(dim=1)
    unit = d_mat / norms.clamp(min=1e-12)[:, None]
    banned = norms <= 1e-12
    if exclude is not None:
        banned = banned | torch.as_tensor(exclude, dtype=torch.bool)
    if int((~banned).sum()) < k:
        raise DataError(
            f"OMP needs {k} usable atoms; only {int((~banned).sum())} rows are non-zero and allowed"
        )
    m = y.shape[0]
    idx = torch.zeros((m, k), dtype=torch.long)
    coef = torch.zeros((m, k), dtype=torch.float64)
    chunk = max(1, (1 << 25) // n)  # targets per block: the correlations stay ≈ 256 MB
    for s in range(0, m, chunk):
        idx[s : s + chunk], coef[s : s + chunk] = _omp_block(d_mat, unit, banned, y[s : s + chunk], k)
    return idx, coef.float()


def hidden_space_rows(
    model: Any,
    matrices: list[Any],
    pieces: list[list[int]],
    prefix_id: int,
    *,
    exclude: set[int] | None = None,
    k: int = DEFAULT_K,
    anchors: int = DEFAULT_ANCHORS,
    layer: int | None = None,
    batch: int = 256,
) -> list[Any]:
    """New rows for every matrix in `matrices` (input rows first; each indexed by the original ids): OMP codes of
    each new token's hidden state (its `pieces` read after `prefix_id`, at the last piece; layer `layer`, default
    the middle one) over the hidden states of the anchors (ids 0 … `anchors` − 1 minus `exclude`, each read
    alone after the prefix), applied to the anchors' rows. One float32 tensor (m × width) per matrix."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    n_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    layer = n_layers // 2 if layer is None else layer
    n_rows = int(matrices[0].shape[0])
    ids = [i for i in range(min(anchors, n_rows)) if i not in (exclude or set())]
    if len(ids) < k:
        raise DataError(f"OMP needs at least {k} anchor tokens, the vocabulary offers {len(ids)}")
    device = next(model.parameters()).device
    anchor_h = _states(model, [[prefix_id, i] for i in ids], layer, batch, device)
    seqs = [[prefix_id, *(p or [prefix_id])] for p in pieces]
    new_h = _states(model, seqs, layer, batch, device)
    idx, coef = omp(anchor_h, new_h, k)
    chosen = torch.as_tensor(ids)[idx]  # m × k original ids
    out = []
    for mat in matrices:
        atoms = mat.detach().cpu()[chosen].to(torch.float64)
        out.append((coef.double()[:, None, :] @ atoms)[:, 0, :].float())
    return out


def _states(model: Any, seqs: list[list[int]], layer: int, batch: int, device: Any) -> Any:
    """Hidden states (float32, CPU) at layer `layer` of the last token of every sequence, batched."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    out = []
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    for s in range(0, len(order), batch):
        group = [seqs[i] for i in order[s : s + batch]]
        width = max(len(q) for q in group)
        x = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros_like(x)
        for r, q in enumerate(group):
            x[r, : len(q)] = torch.as_tensor(q)
            mask[r, : len(q)] = 1
        with torch.inference_mode():
            kw = {"input_ids": x.to(device), "attention_mask": mask.to(device), "output_hidden_states": True}
            try:
                h = model(logits_to_keep=1, **kw).hidden_states[layer]
            except TypeError:
                h = model(**kw).hidden_states[layer]
        last = mask.sum(1) - 1
        out.append(h[torch.arange(len(group)), last.to(h.device)].float().cpu())
    states = torch.cat(out)
    back = torch.empty_like(states)
    back[torch.as_tensor(order)] = states
    return back


def _omp_block(d_mat: Any, unit: Any, banned: Any, y: Any, k: int) -> tuple[Any, Any]:
    """OMP for one block of targets (float64 tensors)."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    m = y.shape[0]
    idx = torch.zeros((m, k), dtype=torch.long)
    coef = torch.zeros((m, k), dtype=torch.float64)
    residual = y.clone()
    used = banned[None, :].repeat(m, 1)
    rows = torch.arange(m)
    for step in range(k):
        corr = (residual @ unit.T).abs()
        corr[used] = -1.0
        pick = corr.argmax(dim=1)
        idx[:, step] = pick
        used[rows, pick] = True
        atoms = d_mat[idx[:, : step + 1]]  # m × (step+1) × d
        # least squares min ‖atomsᵀ c − y‖ for every target at once
        sol = torch.linalg.lstsq(atoms.transpose(1, 2), y[:, :, None]).solution[:, :, 0]
        coef[:, : step + 1] = sol
        residual = y - (sol[:, None, :] @ atoms)[:, 0, :]
    return idx, coef
