"""Self-Tokenization Test (STT): which vocabulary tokens the merges can never produce.

Paper 000 §3.3 and methods.md §2: run the *model only* (no normalizer, pre-tokenizer or added-token
split) on every vocabulary string, with `ignore_merges` off and no dropout; a token is reachable iff the
model returns exactly that one token.
"""

from __future__ import annotations

from .errors import UnsupportedTokenizerError
from .tokenizer import LoadedTokenizer


def self_tokenize(tok: LoadedTokenizer) -> dict[int, list[int]]:
    """For every model-vocabulary id, the ids the bare model (ignore_merges off, no dropout) returns."""
    if tok.model_type != "BPE":
        raise UnsupportedTokenizerError(
            f"the Self-Tokenization Test needs a BPE model; {tok.name} is {tok.model_type}"
        )
    doc = tok.document()
    doc["model"]["ignore_merges"] = False
    doc["model"]["dropout"] = None
    from .tokenizer import LoadedTokenizer as _LT

    model = _LT.from_document(doc, name=tok.name).tokenizer.model
    return {i: [t.id for t in model.tokenize(s)] for s, i in tok.vocab.items()}


def unreachable_ids(tok: LoadedTokenizer, *, ignore_added: bool = True) -> set[int]:
    """Ids of model-vocabulary tokens that STT cannot reach (added tokens excluded by default)."""
    res = self_tokenize(tok)
    bad = {i for i, ids in res.items() if ids != [i]}
    if ignore_added:
        bad -= set(tok.added_ids)
        added_contents = {a.content for a in tok.added_tokens}
        bad = {i for i in bad if tok.id_to_token.get(i) not in added_contents}
    # byte-fallback pieces are reached by byte fallback, the unk token by design: not failures
    bad = {i for i in bad if not tok.is_byte_piece(tok.id_to_token[i]) and tok.id_to_token[i] != tok.unk_token}
    return bad
