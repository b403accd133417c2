"""Bad options and inputs of the commands that read files and folders (issue 54, items 6, 8, 12, 14, 16, 17): the
same `--langs` check everywhere, progress on stderr, a restart that deletes only what the tool wrote, bounds checked
before a library panics, and full disks reported."""

from __future__ import annotations

import pytest
from bad_run import assert_clear_error
from support import TOKENIZERS

GPT2 = TOKENIZERS / "gpt2"

LANGS_COMMANDS = {
    "export-check": ["export-check", GPT2, "--no-parity"],
    "model-check": ["model-check", "--original", "a", "--edited", "b"],
    "parity-train": ["parity-train", "--vocab-size", "1000"],
    "compress": ["compress", "--tokenizer", GPT2],
}


@pytest.mark.parametrize("command", list(LANGS_COMMANDS))
@pytest.mark.parametrize("spec", [",,,", "xx_Yyyy"])
def test_every_langs_option_is_checked_the_same_way(cli, command, spec):
    assert_clear_error(cli(*LANGS_COMMANDS[command], "--langs", spec), "--langs: ")
