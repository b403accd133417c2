"""Change pages' explanations: a flat pruning curve says why (the removed tokens never occur in the held-out
lines), and a pruned tokenizer whose bytes/token does not move shows "no change" instead of a red −0.000."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared

from analysis.methods import pruning as P
from analysis.texts.flores import split_lines


@pytest.mark.slow
def test_flat_prune_curve_gets_a_reason_and_no_red_zero():
    tok = load_shared("llama-2")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["toklab_library"] = {"llama-2": tok}
    at.switch_page("pages/prune.py").run()
    at.multiselect(key="prune-langs").set_value(["est_Latn"]).run()
    at.slider(key="prune-points").set_value(3)
    at.number_input(key=f"prune-maxn-{tok.content_hash}").set_value(300)
    at.checkbox(key="prune-stt").uncheck()
    at.button[0].click()  # the form's "Compute curves"
    at.run()
    at.number_input(key="prune-n").set_value(300).run()
    assert not at.exception, [e.message for e in at.exception]
    # what the page should say: how often the first 300 tokens of the order occur in the est held-out lines
    train, held = split_lines("est_Latn", 800)
    order = P.compute_order(tok, "leaf-frequency", P.mix_texts([train], by="lines"))
    removed = set(order.ids[:300])
    used = sum(
        i in removed for e in tok.tokenizer.encode_batch(held, add_special_tokens=False) for i in e.ids
    )
    reason = (
        "none of the 300 tokens"
        if used == 0
        else f"the 300 tokens this order removes first make up only {used:,}"
    )
    captions = [c.value for c in at.caption]
    assert any(c.startswith("est_Latn is flat:") and reason in c for c in captions), captions
    bpt = next(m for m in at.metric if m.label.startswith("bytes/token"))
    assert bpt.proto.delta == "no change"
