"""Real browser: extend Llama-3.1 with 1,000 Estonian tokens, see before/after, download the zip; issue 53's journey
with the default start (server paths off): upload SmolLM2's tokenizer, extend it for Estonian, check the model with
it as a job (a reload mid-job finds it again), export the model into the workspace, download the Hugging Face folder
and the .gguf by their links and export-check the .gguf in the app."""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
import time
import zipfile
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import gguf
import tokenizers
from e2e_support import choose, download, mark, screenshot, server_data, set_number, wait_idle, wait_rerun
from playwright.sync_api import Download, Page, expect
from support import ROOT, TOKENIZERS, need_smollm

from analysis.core.workspace import store_at


def test_extend_llama3_with_estonian_and_download(page: Page, app_url, artifacts):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(app_url)  # the Home page's journey "Adapt a tokenizer to a language": one click
    wait_idle(page)
    page.get_by_role("link", name="Open Extend").click()
    expect(page.get_by_text("Extend a tokenizer", exact=True)).to_be_visible(timeout=60_000)
    expect(page.get_by_text("lines 801–1012 are held out", exact=False)).to_be_visible(timeout=60_000)
    wait_idle(page)
    expect(page.get_by_role("combobox", name="Tokenizer")).to_have_value("llama-3.1")  # the link's tokenizer

    page.get_by_role("button", name="Train", exact=True).click()
    wait_idle(page, timeout=600_000)
    expect(page.get_by_text("Bytes per token at N = 1,000")).to_be_visible(timeout=600_000)
    # the results sit in tabs right under the N slider: the first one starts above the fold at 1280×800
    page.locator('[data-testid="stMain"]').evaluate("e => e.scrollTo(0, 0)")  # the Train click scrolled
    first = page.get_by_role("tab", name="Compression").bounding_box()
    assert first and first["y"] + first["height"] < 800, first
    # bytes/token per text (the first table of the open tab): fits the page width
    table = page.locator('[data-testid="stDataFrame"]').filter(visible=True).first
    box, main = table.bounding_box(), page.locator('[data-testid="stMainBlockContainer"]').bounding_box()
    assert box and main and box["x"] + box["width"] <= main["x"] + main["width"] + 1
    screenshot(page, artifacts / "change_extend_llama3_est.png")
    page.get_by_role("tab", name="Before and after").click()
    expect(page.get_by_role("heading", name="Before and after")).to_be_visible()
    expect(page.get_by_text("Continued BPE training (", exact=False).first).to_be_visible()

    page.get_by_role("tab", name="Export").click()
    page.get_by_role("button", name="Build the extended tokenizer").click()
    wait_idle(page, timeout=300_000)
    path = download(page, "Download zip (Hugging Face folder)", artifacts / "extend_llama3_est.zip", 300_000)
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as zf:
        names = zf.namelist()
        tj = next(n for n in names if n.endswith("/tokenizer.json"))
        report = json.loads(zf.read(next(n for n in names if n.endswith("extension_report.json"))))
        tok = tokenizers.Tokenizer.from_str(zf.read(tj).decode("utf-8"))
    assert report["method"] == "continued" and report["added"] == 1000 and report["unreachable_added"] == 0
    assert tok.get_vocab_size() == 128256 + 1000
    assert tok.token_to_id("<|begin_of_text|>") == 128000
    # the CLI's extension_report.json (python -m analysis extend writes the same schema)
    held = report["heldout"]["est_Latn (FLORES held-out)"]
    assert held["bytes_per_token_after"] > held["bytes_per_token_before"]
    assert report["n_requested"] == 1000 and len(report["added_tokens"]) == 1000
    # the edited tokenizer joins the library, one pick away on every page; the preview takes your own text
    page.get_by_role("button", name="Add to library").click()
    wait_idle(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    expect(sidebar.get_by_text("llama-3.1 +1000 (Continued BPE training)")).to_be_visible(timeout=60_000)
    page.get_by_role("tab", name="Before and after").click()
    own = page.get_by_label("Your own text (empty: the first held-out FLORES sentence)")
    own.fill("Tere hommikust, kallid sõbrad! Täna räägime tokenisaatoritest.")
    own.press("Control+Enter")
    wait_idle(page, timeout=300_000)
    expect(page.get_by_text("Base (27 tokens)")).to_be_visible(timeout=300_000)
    # every method's line is for this text (the naive method builds its tokenizer first: wait for it)
    expect(page.get_by_text(re.compile(r"\(\d+ tokens vs 27\)"))).to_have_count(2, timeout=300_000)
    wait_idle(page, timeout=300_000)
    screenshot(page, artifacts / "change_extend_own_text_added.png")


#: The demo model's entry in the model pickers (tests/fetch_models.sh fetches it).
SMOL_MODEL = "SmolLM2-135M-Instruct (GGUF, fetched)"
#: New tokens: enough to show the new rows, few enough to train in seconds.
SMOL_N = 100
#: Upper bound for the worker's two jobs (the model check, then the model export) on a loaded 2-core machine.
JOBS_MS = 600_000


def _download_link(page: Page, label: str, timeout_s: float = 300) -> Download:
    """Follow the page's streamed download link whose label starts with `label` and catch its download, in this tab
    or in a tab the click opens (which closes at once: listeners attached before the click). The download, still
    in the browser's download folder."""
    got: list[Download] = []

    def caught(dl: Download) -> None:
        got.append(dl)

    def follow(tab: Page) -> None:
        tab.on("download", caught)

    page.context.on("page", follow)
    page.on("download", caught)  # or in this tab, when the link opens none
    try:
        page.get_by_role("link", name=re.compile("^" + re.escape(label))).click()
        deadline = time.monotonic() + timeout_s
        while not got:
            assert time.monotonic() < deadline, f"no download from {label!r}"
            page.wait_for_timeout(100)
    finally:
        page.context.remove_listener("page", follow)
        page.remove_listener("download", caught)
    return got[0]


def _safetensors_shapes(zf: zipfile.ZipFile, member: str) -> dict[str, list[int]]:
    """The tensors' shapes of a safetensors member, from its header alone (the weights stay in the zip)."""
    with zf.open(member) as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
    return {k: v["shape"] for k, v in header.items() if k != "__metadata__"}


@need_smollm
def test_upload_extend_smollm2_check_and_export_its_model_in_the_browser(page: Page, app_url, artifacts):
    """Issue 53's journey with the default start (server paths off): upload SmolLM2's tokenizer.json, extend it
    for Estonian, check the model with it (a job of the server's worker: a reload mid-job finds it again), export
    the model into the workspace, download the Hugging Face folder and the .gguf by their links, export-check the
    .gguf in the app."""
    page.set_default_timeout(600_000)
    page.goto(app_url + "/inspect")
    wait_idle(page)
    page.get_by_role("tab", name="Upload").click()
    since = mark(page)
    page.locator('[data-testid="stMain"] [data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        str(TOKENIZERS / "smollm2-135m-instruct" / "tokenizer.json")
    )
    wait_rerun(page, since)
    since = mark(page)
    page.get_by_role("button", name="Add upload to library").click()
    wait_rerun(page, since)
    name = "tokenizer (BPE, 49,152 tokens)"  # a tokenizer.json says nothing of whose it is
    expect(page.locator('[data-testid="stSidebar"]').get_by_text(name, exact=True)).to_be_visible()
    ws = parse_qs(urlparse(page.url).query)["ws"][0]

    page.goto(f"{app_url}/extend?ws={ws}")  # the upload is in the workspace: the link finds it
    wait_idle(page)
    expect(page.get_by_role("combobox", name="Tokenizer")).to_have_value(name)  # the latest addition
    n_max = page.get_by_label("Train up to N new tokens")
    n_max.fill(str(SMOL_N))
    since = mark(page)
    n_max.press("Enter")
    wait_rerun(page, since)
    page.get_by_role("button", name="Train", exact=True).click()
    expect(page.get_by_text(f"Bytes per token at N = {SMOL_N}")).to_be_visible()
    wait_idle(page)
    _open_export(page)
    tokenizer_zip = download(page, "Download zip (Hugging Face folder)", artifacts / "extend_smollm2_est.zip")
    with zipfile.ZipFile(tokenizer_zip) as zf:
        extended = zf.read(next(n for n in zf.namelist() if n.endswith("/tokenizer.json")))
    vocab = tokenizers.Tokenizer.from_str(extended.decode("utf-8")).get_vocab_size()
    assert vocab == 49152 + SMOL_N

    choose(page, page.get_by_role("combobox", name="Model of this tokenizer"), SMOL_MODEL)
    since = mark(page)
    page.get_by_text("Also write a .gguf for llama.cpp").click()
    wait_rerun(page, since)
    # the model check: one language, two lines (what proves it runs; the CLI's numbers need all 212)
    langs = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Languages (held-out FLORES lines")
    since = mark(page)
    langs.get_by_role("button", name=re.compile("eng_Latn")).click()
    wait_rerun(page, since)
    set_number(page, "Lines per language", 2)
    since = mark(page)
    page.get_by_role("button", name="Check the model").click()
    wait_rerun(page, since)
    expect(page.get_by_text(re.compile(r"^Model check · (Queued|Running)"))).to_be_visible()
    # a reload mid-job: the workspace keeps the page's inputs, what was trained and built, and the job
    page.reload()
    expect(page.get_by_text(f"Bytes per token at N = {SMOL_N}")).to_be_visible()  # no click: shown again
    # the inputs came back through Session State, and no restored widget was also given its default (Streamlit would
    # log that it was "created with a default value but also had its value set via the Session State API")
    log = (ROOT / "streamlit-e2e.log").read_text(encoding="utf-8")
    assert "created with a default value but also had its value set" not in log
    wait_idle(page)
    page.get_by_role("tab", name="Export").click()
    expect(page.get_by_role("button", name="Download zip (Hugging Face folder)")).to_be_visible()
    check = page.get_by_text(re.compile(r"^Model check · (Queued|Running)")).or_(
        page.get_by_role("button", name="Download model_check.json")
    )
    expect(check.first).to_be_visible()
    # the model export: the worker takes it after the check (one queue)
    since = mark(page)
    page.get_by_role("button", name="Export the model into this workspace").click()
    wait_rerun(page, since)
    expect(page.get_by_role("button", name="Download model_check.json")).to_be_visible(timeout=JOBS_MS)
    expect(page.get_by_role("link", name=re.compile("^Download the .gguf"))).to_be_visible(timeout=JOBS_MS)
    wait_idle(page)
    screenshot(page, artifacts / "journey_smollm2_model_check.png")
    doc = json.loads(
        download(page, "Download model_check.json", artifacts / "journey_model_check.json").read_text()
    )
    (est,) = doc["languages"]
    assert (est["lang"], est["lines"], doc["n_new_tokens"]) == ("est_Latn", 2, SMOL_N)
    assert est["tokens_per_byte_edited"] < est["tokens_per_byte_original"]  # the new Estonian tokens are used

    hf = _download_link(page, "Download the model (Hugging Face folder, zip)")
    try:
        with zipfile.ZipFile(hf.path()) as zf:
            names = zf.namelist()
            assert zf.read(next(n for n in names if n.endswith("/tokenizer.json"))) == extended
            shapes = _safetensors_shapes(zf, next(n for n in names if n.endswith("/model.safetensors")))
    finally:
        hf.delete()
    rows = shapes["model.embed_tokens.weight"][0]
    assert rows >= vocab > 49152  # one row per token of the extended vocabulary
    gg = _download_link(page, "Download the .gguf")
    try:
        reader = gguf.GGUFReader(gg.path())
        tokens = reader.fields["tokenizer.ggml.tokens"]
        embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
        assert len(tokens.data) == vocab and max(int(d) for d in embd.shape) >= vocab
        del reader
    finally:
        gg.delete()

    # the export check of the .gguf the job kept in the workspace (server paths are off: a workspace file)
    choose(
        page, page.get_by_role("combobox", name="Export to check"), re.compile(r"^Workspace file: .*\.gguf$")
    )
    set_number(page, "Held-out lines each", 2)
    since = mark(page)
    page.get_by_role("button", name="Run the export check").click()
    wait_rerun(page, since)
    # a job of the server's workers: its panel, then the report
    expect(page.get_by_text(re.compile(r"\.gguf \(gguf\): ok"))).to_be_visible(timeout=JOBS_MS)
    expect(
        page.get_by_text(re.compile(r"[\d,]+ of [\d,]+ lines identical"))
    ).to_be_visible()  # llama.cpp parity
    screenshot(page, artifacts / "journey_smollm2_export_check.png")
    # the models are 100s of MB: leave nothing of this workspace on the servers' disk
    store = store_at(server_data())
    unpacked = [store.file_path(ws, "artifact", i.name) for i in store.items(ws, "artifact")]
    store.delete(ws)
    for blob in unpacked:
        if blob is not None:
            shutil.rmtree(Path(server_data()) / "models" / blob.name, ignore_errors=True)


def _open_export(page: Page) -> None:
    """The Export tab, with the extended tokenizer built (its zip's download button is there)."""
    page.get_by_role("tab", name="Export").click()
    since = mark(page)
    page.get_by_role("button", name="Build the extended tokenizer").click()
    wait_rerun(page, since)
    expect(page.get_by_role("button", name="Download zip (Hugging Face folder)")).to_be_visible()
