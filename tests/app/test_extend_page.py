"""AppTest for the Extend page: continued BPE training on the FLORES Estonian lines against the naive methods
(bytes/token per method, STT-unreachable tokens added), the n slider and the export. The engine is tested in
tests/methods/extension/."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared


@pytest.mark.slow
def test_extend_page_trains_previews_and_exports():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("pages/extend.py")
    at.run()
    at.session_state["toklab_library"] = {**at.session_state["toklab_library"], "gpt2": load_shared("gpt2")}
    at.run()
    at.selectbox(key="ext-tok").set_value("gpt2").run()
    at.multiselect(key="ext-corpora").set_value([]).run()  # FLORES training lines only: fast
    at.number_input(key="ext-nmax").set_value(200).run()
    at.button(key="ext-train").click().run()
    assert not at.exception and not at.error
    # bytes/token: a column per method
    bpt = at.dataframe[0].value.set_index("text").loc["est_Latn (FLORES held-out)"]
    added = at.dataframe[1].value.set_index("method")
    cont = added.loc["Continued BPE training"]
    assert cont["added"] == 200 and cont["STT-unreachable added"] == 0
    assert bpt["continued"] > bpt["regen"] > bpt["before"]
    speculative = [c.value for c in at.caption if "Speculative decoding" in c.value]
    assert any("N ≤ 128 keeps" in c and "N = 200 does not" in c for c in speculative), speculative
    at.slider(key="ext-n").set_value(50).run()
    assert at.dataframe[1].value.set_index("method").loc["Continued BPE training"]["added"] == 50
    at.button(key="ext-build").click().run()
    assert not at.exception
    assert any("gpt2 +50 and the original are a valid draft/target pair" in c.value for c in at.caption)
    strr = next(f.value for f in at.dataframe if "STRR before" in f.value.columns).set_index("Language")
    assert float(strr.loc["est_Latn", "STRR after"].rstrip("%")) > float(
        strr.loc["est_Latn", "STRR before"].rstrip("%")
    )
    assert at.get("download_button")
