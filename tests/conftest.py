"""Generic fixtures for every test (shared tokenizers; AppTest runs pages inside the app.py frame), and the tiny
models that a method's engine tests (tests/methods/…) and its page tests (tests/app/…) both use. Helpers (paths,
example tokenizers, FLORES lines) live in tests/support.py; the real-browser fixtures live in tests/e2e/conftest.py."""

from __future__ import annotations

import collections
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import app_test, local_script_runner
from support import flores_lines, load_shared, share_the_cores, tag_xdist_groups

from analysis import LoadedTokenizer

#: Set by the first process of a run (the controller under pytest-xdist), inherited by its workers and servers.
_RUN_CACHE = "TOKLAB_TEST_RUN_CACHE"
_OWNS_CACHE = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    """Give the whole run one empty disk cache (`TOKLAB_CACHE`) and workspace store (`TOKLAB_DATA`), as a freshly
    booted machine has.

    Without it a test could pass only because an earlier run (or another test file) filled the user's
    `~/.cache/tokenizer-lab`: every run now starts cold, whatever the machine did before. Worker processes and the
    Streamlit servers the browser tests start inherit the same folder through the environment, so one run
    computes each cached result once. Tests that need a cache of their own still set `TOKLAB_CACHE` themselves.
    """
    if not os.environ.get(_RUN_CACHE):
        os.environ[_RUN_CACHE] = tempfile.mkdtemp(prefix="toklab-test-cache-")
        config.stash[_OWNS_CACHE] = True
    os.environ["TOKLAB_CACHE"] = str(Path(os.environ[_RUN_CACHE]))
    # never the user's workspaces; one store per test process, so that the job workers a test's server starts never
    # take the jobs another process's tests queue (the browser tests' servers have their own: e2e_support)
    os.environ["TOKLAB_DATA"] = str(
        Path(os.environ[_RUN_CACHE]) / f"workspaces-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's disk cache in the process that made it (the last to finish)."""
    if config.stash.get(_OWNS_CACHE, False):
        shutil.rmtree(os.environ.pop(_RUN_CACHE), ignore_errors=True)


@pytest.hookimpl(trylast=True)  # after tests/e2e/conftest.py has marked its journeys as one group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`TOKLAB_TEST_ORDER=shuffle:SEED` runs the collected tests in a seeded random order (`reverse` backwards):
    the check that no test depends on another having run first (`bash scripts/test.sh` with it set)."""
    how = os.environ.get("TOKLAB_TEST_ORDER", "").strip()
    if how == "reverse":
        items.reverse()
    elif how.startswith("shuffle:"):
        random.Random(how.removeprefix("shuffle:")).shuffle(items)
    # longest first: the slow tests lead (in the order above), the quick ones fill the gaps between the two
    # workers, so no worker is left with a minute-long test while the other has finished (pytest-xdist hands out
    # work in collection order; its one big group, the browser journeys, goes first anyway)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    # under `--dist loadgroup` (a worker's option), each group (the browser journeys) runs
    # on one worker: see support.tag_xdist_groups for why pytest-xdist no longer does this by itself
    if getattr(config.option, "loadgroup", False):
        tag_xdist_groups(items)


# the app builds the example gallery in the background at a server's first start: never inside the test suite
os.environ.setdefault("TOKLAB_GALLERY_AUTOSTART", "0")
# the robustness report of every edit times its pathological inputs at 512 KiB each (about 1.4 s a tokenizer):
# the suite runs that path on dozens of edits, so it times them at 16 KiB (tests of the timing set their own)
os.environ.setdefault("TOKLAB_PATHOLOGICAL_KB", "16")


# each pytest-xdist worker (and every process it starts) gets its share of the cores
share_the_cores()


@pytest.fixture(scope="session")
def shared_tokenizer() -> Callable[[str], LoadedTokenizer]:
    """A function name → LoadedTokenizer for the shared assets (cached for the session)."""
    return load_shared


@pytest.fixture(autouse=True, scope="session")
def apptest_runs_like_a_warm_server() -> Iterator[None]:
    """Let AppTest run every page inside the app.py frame, as a running server does.

    A server leaves Streamlit's legacy "pages/ folder" mode once, on its first request (`ui/__init__.py`); AppTest
    resets `PagesManager.uses_pages_directory` before every run, so without this each rerun would execute the page
    file alone (no frame, no error boundary, no sidebar). The first request of a fresh server is tested on its own,
    in a fresh process (tests/app/test_app_pages.py::test_first_deep_link_of_a_fresh_server_runs_in_the_frame).
    """
    original = PagesManager.__init__

    def init(self: PagesManager, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    PagesManager.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        PagesManager.__init__ = original  # type: ignore[method-assign]


#: page bytecode compiled by any AppTest of this process, by (path, modification time, size)
_BYTECODE: dict[tuple[str, int, int], Any] = {}


class _ProcessScriptCache(ScriptCache):
    """Streamlit's bytecode cache, shared by every AppTest of the process: each AppTest makes a new `ScriptCache`,
    so every test compiled app.py and its pages again (Streamlit's "magic" rewrite parses each file): 35 s of the
    two workers' time in a whole run. A file changed on disk is compiled again."""

    def get_bytecode(self, script_path: str) -> Any:
        """The compiled script, from the process-wide table or compiled now."""
        path = os.path.abspath(script_path)
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        code = _BYTECODE.get(key)
        if code is None:
            code = _BYTECODE[key] = super().get_bytecode(path)
        return code


app_test.ScriptCache = _ProcessScriptCache  # type: ignore[misc]
local_script_runner.ScriptCache = _ProcessScriptCache  # type: ignore[misc]


# ------------------------------------------------------------------------------- tiny models, shared by the
# engine tests (tests/methods/…) and the page tests (tests/app/…) of one method
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A 2-layer untied Llama trained for one epoch on English FLORES; its BPE vocabulary also learned Estonian
    text, so some vocabulary tokens never occur in the training data.

    Besides the folder, it reports what the learning assertions need: the mean next-token loss over the whole
    training text before and after training, the unigram entropy of that text (the loss of a model that knows
    only the token frequencies) and how far the input rows of never-seen tokens moved (AdamW without weight
    decay leaves a row whose gradient is always zero exactly where it was initialised)."""
    import torch  # noqa: PLC0415 - heavy, only for the tiny-model fixture
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: PLC0415
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: PLC0415

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is fastest and fair to a shared machine
    try:
        eng, est = flores_lines("eng_Latn"), flores_lines("est_Latn", 150)
        tk = Tokenizer(models.BPE())
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tk.decoder = decoders.ByteLevel()
        tr = trainers.BpeTrainer(
            vocab_size=600,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            special_tokens=["<|endoftext|>"],
            show_progress=False,
        )
        tk.train_from_iterator(eng[:800] + est, trainer=tr)
        v = tk.get_vocab_size()
        seq, bs = 48, 8
        ids = [i for e in tk.encode_batch(eng) for i in (*e.ids, 0)]
        n_chunks = len(ids) // seq  # every token of the text is fed in each epoch (no sampling gaps)
        ids = ids[: n_chunks * seq]
        counts = collections.Counter(ids)
        p = np.array(list(counts.values()), dtype=np.float64) / len(ids)
        unigram_entropy = float(-(p * np.log(p)).sum())
        data = torch.tensor(ids).view(n_chunks, seq)
        torch.manual_seed(0)
        cfg = LlamaConfig(
            vocab_size=v,
            hidden_size=48,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=2048,
            tie_word_embeddings=False,
            bos_token_id=None,
            eos_token_id=0,
            pad_token_id=0,
        )
        model = LlamaForCausalLM(cfg)

        def mean_loss() -> float:
            with torch.no_grad():
                total = sum(float(model(input_ids=x, labels=x).loss) * len(x) for x in data.split(64))
            return total / n_chunks

        unseen = torch.tensor([i for i in range(v) if counts[i] == 0])
        emb_before = model.get_input_embeddings().weight.detach()[unseen].clone()
        loss_before = mean_loss()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
        order = torch.randperm(n_chunks, generator=torch.Generator().manual_seed(0))
        for s in range(0, n_chunks, bs):
            x = data[order[s : s + bs]]
            loss = model(input_ids=x, labels=x).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        loss_after = mean_loss()
        unseen_moved = float((model.get_input_embeddings().weight.detach()[unseen] - emb_before).abs().max())
        folder = tmp_path_factory.mktemp("tiny") / "model"
        model.save_pretrained(folder, safe_serialization=True)
        tk.save(str(folder / "tokenizer.json"))
        assert (folder / "model.safetensors").is_file()
        return {
            "folder": folder,
            "counts": counts,
            "vocab": v,
            "loss_before": loss_before,
            "loss_after": loss_after,
            "unigram_entropy": unigram_entropy,
            "unseen_moved": unseen_moved,
        }
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_llama2(tmp_path_factory):
    """A tiny random Llama on llama-2's vocabulary, saved as safetensors."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2)  # fmt: skip
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny") / "model"
    transformers.LlamaForCausalLM(cfg).save_pretrained(str(path), safe_serialization=True)
    emb = transformers.AutoModelForCausalLM.from_pretrained(str(path)).get_input_embeddings().weight
    return path, emb.detach().float().numpy()
