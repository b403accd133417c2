"""Orthogonal matching pursuit (OMP) over existing embedding rows: each new token's vector as a sparse
combination of `k` existing rows (after Goddard & Fernandes Neto, "Training-Free Tokenizer Transplantation via
Orthogonal Matching Pursuit", 2025).

In the paper a donor model supplies both the new token's vector and the anchors' vectors in one space; the
coefficients found there are applied to the anchors' rows of the base model. An extension has no donor: the
shared space here is the original model's input embedding space, the target is the token's FVT vector (the mean
of its pieces' rows, :mod:`analysis.model.fvt`) and the anchors are every existing row. The coefficients are
then applied to the input rows and, for an untied head, to the same anchors' output rows — the transfer step of
the paper between the two spaces of one model.

:func:`omp` is a batched, deterministic implementation (greedy atom choice by the largest absolute correlation
with the residual, then a least-squares refit on the chosen atoms), in torch, float64 for the refit.
"""

from __future__ import annotations

from typing import Any

from analysis.errors import DataError

#: Atoms per new token (the paper sweeps k; 8 is a small, common choice).
DEFAULT_K = 8


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


def omp_rows(
    matrices: list[Any], targets: Any, k: int = DEFAULT_K, *, anchors: int | None = None
) -> list[Any]:
    """New rows for every matrix in `matrices` (the first one is the space OMP runs in): the codes of `targets`
    over the first `anchors` rows of ``matrices[0]`` (all rows when None), applied to the same rows of each
    matrix. Returns one float32 tensor (m × its width) per matrix."""
    import torch  # noqa: PLC0415 - heavy, only when rows are initialised

    base = matrices[0][:anchors] if anchors is not None else matrices[0]
    idx, coef = omp(base.float(), targets.float(), k)
    out = []
    for mat in matrices:
        atoms = mat[idx].to(torch.float64)  # m × k × d
        out.append((coef.double()[:, None, :] @ atoms)[:, 0, :].float())
    return out


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
