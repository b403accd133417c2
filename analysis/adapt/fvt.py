"""Fast Vocabulary Transfer (FVT): the embedding row of a new token is the mean of the rows of its pieces under
the original tokenizer (Gee, Zugarini, Rigutini, Torroni, "Fast Vocabulary Transfer for Language Model
Compression", EMNLP 2022 Industry Track; used for extension and pruning by Purason et al., "Teaching Old
Tokenizers New Words", arXiv 2512.03989, 2025, App. E, and for merged tokens by Feher, Vulić, Minixhofer,
"Retrofitting Large Language Models with Dynamic Tokenization", arXiv 2411.18553, 2024).

One implementation for every caller: :mod:`analysis.adapt.embeddings` (new rows when a model follows a pruned or
extended tokenizer) and :mod:`analysis.methods.dynamic.model` (rows of merged tokens).

* :func:`fvt_pieces` — the original tokenizer's ids for one new token;
* :func:`fvt_rows` — the mean rows for many tokens' pieces (numpy or torch, in and out).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from analysis.bpe import bare_tokenize_fn
from analysis.tokenizer.tokenizer import LoadedTokenizer

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def fvt_pieces(
    tok: LoadedTokenizer,
    token: str,
    *,
    text: bool = False,
    tokenize: Callable[[str], Any] | None = None,
) -> list[int]:
    """The ids of `tok` (the ORIGINAL tokenizer) whose rows FVT averages for a new token.

    `token` is a vocabulary string (byte-mapped / ``▁`` form, as a vocabulary, a merge or a merged sequence holds
    it): an added token of `tok` maps to its own id; in a SentencePiece-style vocabulary each ``<0xNN>`` byte
    piece maps to its own id; the rest goes through `tok`'s bare BPE model (``model.tokenize``: no normalizer,
    no pre-tokenizer, ignore_merges off, no dropout).

    With `text`, `token` is plain text (e.g. an added token of the new tokenizer) and goes through `tok`'s full
    pipeline without special tokens. `tokenize` is a prepared :func:`analysis.bpe.stt.bare_tokenize_fn`
    of `tok` (pass one when converting many tokens).
    """
    if text:
        return list(tok.tokenizer.encode(token, add_special_tokens=False).ids)
    added = {a.content: a.id for a in tok.added_tokens}
    if token in added:
        return [added[token]]
    tokenize = tokenize if tokenize is not None else bare_tokenize_fn(tok)
    if tok.is_byte_level or not _BYTE_PIECE.search(token):
        return [t.id for t in tokenize(token)]
    ids: list[int] = []
    pos = 0
    vocab = tok.vocab
    for m in _BYTE_PIECE.finditer(token):
        if m.start() > pos:
            ids += [t.id for t in tokenize(token[pos : m.start()])]
        piece = f"<0x{m.group(1).upper()}>"
        if piece in vocab:
            ids.append(vocab[piece])
        else:
            ids += [t.id for t in tokenize(m.group(0))]
        pos = m.end()
    if pos < len(token):
        ids += [t.id for t in tokenize(token[pos:])]
    return ids


def fvt_rows(matrix: Any, pieces: Sequence[Sequence[int]], fallback: Any) -> Any:
    """Row r = the mean of ``matrix[pieces[r]]``, or `fallback` when ``pieces[r]`` is empty or leaves the matrix.

    `matrix` is a numpy array or a torch tensor of rows (2-D; a 1-D vector such as an output bias works the same
    way, one value per row); the result has its type, dtype and device. Means are taken in float32 (or the
    matrix's wider float type).
    """
    n = matrix.shape[0]
    if type(matrix).__module__.startswith("torch"):
        import torch  # noqa: PLC0415 - heavy; only reached with a torch tensor in hand

        acc = torch.promote_types(matrix.dtype, torch.float32)
        out = torch.empty((len(pieces), *matrix.shape[1:]), dtype=matrix.dtype, device=matrix.device)
        for r, ids in enumerate(pieces):
            if ids and 0 <= min(ids) and max(ids) < n:
                sel = torch.as_tensor(list(ids), device=matrix.device)
                out[r] = matrix[sel].to(acc).mean(0).to(matrix.dtype)
            else:
                out[r] = fallback
        return out
    arr = np.asarray(matrix)
    out = np.empty((len(pieces), *arr.shape[1:]), dtype=np.result_type(arr.dtype, np.float32))
    for r, ids in enumerate(pieces):
        out[r] = arr[list(ids)].mean(axis=0) if ids and 0 <= min(ids) and max(ids) < n else fallback
    return out.astype(arr.dtype, copy=False) if np.issubdtype(arr.dtype, np.floating) else out
