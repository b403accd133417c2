"""Merge trees: how BPE builds one token from its own string, and helpers to walk, cut and lay out trees.

A tree is a nested ``{"token", "id", "rank", "children": [...]}`` dict (leaves have no children); the replay
(:mod:`analysis.bpe.replay`) builds them with merge skipping (ignore_merges) off.
"""

from __future__ import annotations

from collections.abc import Iterable

from analysis.tokenizer.tokenizer import LoadedTokenizer

from .replay import get_replay, require_bpe


def merge_tree(tok: LoadedTokenizer, token: str) -> dict:
    """How BPE (merges only, ignore_merges off) builds `token` from its own string.

    Returns a nested {"token", "id", "rank", "children": [...]} tree. For a reachable token the root is
    the token itself (`"reachable": True`). For an unreachable one the root is the token with
    `"reachable": False`, `rank` None and as children the trees of the pieces BPE actually builds.
    Added tokens outside the model vocabulary come back as a childless node with `"added": True`.
    """
    require_bpe(tok, "merge trees")
    rust = tok.tokenizer
    tid = tok.vocab.get(token)
    if tid is None:
        aid = rust.token_to_id(token)
        if aid is not None:
            return {"token": token, "id": aid, "rank": None, "children": [], "added": True, "reachable": True}
    rep = get_replay(tok, ignore_merges=False)
    trees = rep.word_trees(token)
    if tid is not None and len(trees) == 1 and trees[0]["id"] == tid:
        root = dict(trees[0])
        root["reachable"] = True
        return root
    return {"token": token, "id": tid, "rank": None, "children": trees, "reachable": False}


def merge_candidates_for(tok: LoadedTokenizer, token: str) -> list[tuple[int, str, str]]:
    """[(rank, left, right)] of the merges (as the model resolves them) whose result is `token`."""
    rep = get_replay(tok, ignore_merges=False)
    tid = rep.vocab.get(token)
    if tid is None:
        return []
    out = []
    for k in range(1, len(token)):
        a, b = token[:k], rep.prefix + token[k:]
        ai, bi = rep.vocab.get(a), rep.vocab.get(b)
        if ai is None or bi is None:
            continue
        m = rep.merge_of(ai, bi)
        if m is not None and m[1] == tid:
            out.append((m[0], a, b))
    return sorted(out)


def tree_depth(node: dict) -> int:
    """Number of merge levels in a tree (a leaf has depth 0)."""
    kids = node.get("children") or []
    return 0 if not kids else 1 + max(tree_depth(k) for k in kids)


def iter_tree(node: dict, depth: int = 0) -> Iterable[tuple[dict, int]]:
    """Pre-order walk yielding (node, depth)."""
    yield node, depth
    for k in node.get("children") or []:
        yield from iter_tree(k, depth + 1)


def collapse_tree(node: dict, max_depth: int, _d: int = 0) -> dict:
    """A copy of a tree cut at `max_depth` levels: deeper subtrees collapse into their root (`collapsed`)."""
    kids = node.get("children") or []
    out = {k: v for k, v in node.items() if k != "children"}
    if kids and _d >= max_depth:
        out["children"] = []
        out["collapsed"] = True
        return out
    out["children"] = [collapse_tree(k, max_depth, _d + 1) for k in kids]
    return out


def layout_forest(trees: list[dict]) -> list[dict]:
    """Tidy layout of several trees side by side: one record per node with x, y (root at y=0, leaves
    below), parent index and the node's fields. Leaves get consecutive x; a parent sits between its children."""
    out: list[dict] = []
    next_x = [0.0]

    def walk(node: dict, depth: int, parent: int | None, tree_no: int) -> int:
        idx = len(out)
        rec = {k: v for k, v in node.items() if k != "children"}
        rec.update({"depth": depth, "parent": parent, "tree": tree_no})
        out.append(rec)
        kids = node.get("children") or []
        if not kids:
            rec["x"] = next_x[0]
            next_x[0] += 1.0
        else:
            xs = [out[walk(k, depth + 1, idx, tree_no)]["x"] for k in kids]
            rec["x"] = (xs[0] + xs[-1]) / 2
        rec["y"] = -depth
        return idx

    for i, t in enumerate(trees):
        walk(t, 0, None, i)
        next_x[0] += 0.6  # a gap between trees
    return out
