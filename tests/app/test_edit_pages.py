"""Edit pages: previews on the user's own text, "Add to library" (a new object, the cached original untouched), and
the defaults that used to surprise (Prune's "Largest N", R-BPE's protections, threshold shortfall)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from support import ROOT, load_shared

from ui.memory import resolve

OWN = "Tere hommikust, kallid sõbrad! Täna räägime tokenisaatoritest."


def _app(page: str, **tokenizers) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.switch_page(page).run()
    at.session_state["toklab_library"] = {**at.session_state["toklab_library"], **tokenizers}
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.mark.slow
def test_extend_previews_own_text_and_adds_the_edited_tokenizer_to_the_library():
    gpt2 = load_shared("gpt2")
    size = gpt2.vocab_size
    at = _app("pages/extend.py", gpt2=gpt2)
    at.selectbox(key="ext-tok").set_value("gpt2").run()
    at.multiselect(key="ext-corpora").set_value([]).run()
    at.number_input(key="ext-nmax").set_value(200).run()
    at.button(key="ext-train").click().run()
    at.text_area(key="ext-own-text").set_value(OWN).run()
    assert not at.exception and not at.error
    base = len(gpt2.tokenizer.encode(OWN, add_special_tokens=False).ids)
    assert f"**Base** ({base} tokens)" in [m.value for m in at.markdown]
    # the method names are not cut to "Naive: new t…": their column is wide
    added = next(d for d in at.dataframe if "method" in d.value.columns)
    assert '"width":"large"' in added.proto.columns.replace(" ", "") or "large" in added.proto.columns
    at.selectbox(key="ext-export-m").set_value("continued").run()
    at.button(key="ext-build").click().run()
    at.button(key="ext-add").click().run()
    lib = at.session_state["toklab_library"]
    name = next(n for n in lib if n.startswith("gpt2 +200"))
    edited = resolve(lib[name])  # the library holds references
    assert edited.vocab_size == size + 200 and gpt2.vocab_size == size and edited is not gpt2
    after = len(edited.tokenizer.encode(OWN, add_special_tokens=False).ids)
    assert after < base
    assert f"**Continued BPE training** ({after} tokens vs {base})" in [m.value for m in at.markdown]
    assert any("Added" in s.value for s in at.success)
    # the edited tokenizer is one pick away on the Playground
    at.switch_page("pages/playground.py").run()
    at.multiselect(key="pg-toks").set_value([name]).run()
    assert not at.exception
    ids = edited.tokenizer.encode(at.text_area(key="pg-text").value, add_special_tokens=False).ids
    assert " ".join(map(str, ids)) in [c.value for c in at.code]


def _largest_n(at: AppTest) -> int:
    return int(next(n.value for n in at.number_input if n.label == "Largest N on the curve"))


@pytest.mark.slow
def test_prune_largest_n_follows_the_tokenizer():
    """It kept the previous tokenizer's value (75,823 after Llama-3.1 on the next tokenizer)."""
    gpt2, smol = load_shared("gpt2"), load_shared("smollm2-135m-instruct")
    at = _app("pages/prune.py", gpt2=gpt2, smol=smol)
    at.selectbox(key="prune-tok").set_value("gpt2").run()
    first = _largest_n(at)
    assert first == gpt2.vocab_size // 2 or first < gpt2.vocab_size // 2
    at.selectbox(key="prune-tok").set_value("smol").run()
    assert not at.exception, [e.message for e in at.exception]
    order_len = int(
        next(m.value for m in at.markdown if "can prune up to" in m.value).split("**")[-2].replace(",", "")
    )
    assert _largest_n(at) == min(order_len, smol.vocab_size // 2) != first


@pytest.mark.slow
def test_prune_previews_own_text_before_and_after():
    gpt2 = load_shared("gpt2")
    at = _app("pages/prune.py", gpt2=gpt2)
    at.selectbox(key="prune-tok").set_value("gpt2").run()
    at.number_input(key="prune-n").set_value(3000).run()
    at.text_area(key="prune-own-text").set_value(OWN).run()
    assert not at.exception, [e.message for e in at.exception]
    before = len(gpt2.tokenizer.encode(OWN, add_special_tokens=False).ids)
    shown = [m.value for m in at.markdown]
    assert f"**Before** ({before} tokens)" in shown
    assert any(s.startswith("**After pruning** (") for s in shown)
    spec = [c.value for c in at.caption if c.value.startswith("Speculative decoding")]
    assert spec and "**not** a valid" in spec[0] and "differ by 3,000 tokens" in spec[0]
    at.button(key="prune-rob-run").click().run()
    rob = next(f.value for f in at.dataframe if "STRR before" in f.value.columns)
    assert not at.exception and len(rob) >= 1
    at.button(key="prune-add").click().run()
    assert any(n.startswith("gpt2 -3000") for n in at.session_state["toklab_library"])


def test_reuse_page_says_when_the_reusable_ids_fall_short_of_the_threshold():
    """GPT-2 has about 200 reusable ids for the default h = 20,000: the page used to say nothing."""
    at = _app("pages/reuse.py", gpt2=load_shared("gpt2"))
    at.selectbox(key="reuse-tok").set_value("gpt2").run()
    assert not at.exception, [e.message for e in at.exception]
    shown = [w.value for w in at.warning if "reusable ids for the threshold" in w.value]
    assert shown and "h = 20,000" in shown[0]
    at.number_input(key="reuse-h").set_value(100).run()
    assert not [w for w in at.warning if "reusable ids for the threshold" in w.value]


@pytest.mark.slow
def test_reuse_sample_text_survives_with_the_default_protections():
    """With the page's defaults (the embedded Qwen), ✔ and ❤ of its own sample were reused: the sample no longer
    decoded back. Shared symbols are now protected by default."""
    at = _app("pages/reuse.py")
    at.button(key="reuse-train").click().run(timeout=300)
    assert not at.exception, [e.message for e in at.exception]
    assert not [w.value for w in at.warning if "does not decode back exactly" in w.value]
    at.multiselect(key="reuse-protect").set_value([]).run()  # the old default: the sample breaks
    at.button(key="reuse-train").click().run(timeout=300)
    assert [w.value for w in at.warning if "does not decode back exactly" in w.value]
