"""The engine's shape: the tiers as folders (a module imports its own tier and the tiers below it, never one above;
engines import no paper method; a method imports no other method except the compositions declared here; corpus
jobs plug methods in through their registry), no import cycle among `analysis` modules (function-level imports
included), and no private API of the `regex` module (Unicode data comes from its public properties, through
`analysis.core.unicode`)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from analysis.jobs import stats as job_stats
from analysis.texts.stat import Stat

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "analysis"

#: Cycles that work in flight removes (issue 11: the BPE package moves the vocabulary structure out of bpe.py).
#: Delete an entry when its fix merges: the test fails while a listed cycle is gone, so the list cannot go stale.
KNOWN_CYCLES: set[frozenset[str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """Names of modules an import statement may load (the caller keeps those that are analysis modules)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    # `from . import x` names the module analysis.x; `from .x import y` the module analysis.x (or analysis.x.y)
    return [target, *(f"{target}.{a.name}" for a in node.names)]


def _stamp(path: Path) -> tuple[str, int, int]:
    """A file as the caches below key it: its path, modification time and size."""
    st = path.stat()
    return str(path), st.st_mtime_ns, st.st_size


def parsed(path: Path) -> ast.Module:
    """The syntax tree of a source file, parsed once per run while the file is unchanged (read-only: the tests
    of this file walk the same ~250 engine files, and parsing them was most of their time)."""
    return _parsed(_stamp(path))


@functools.cache
def _parsed(stamp: tuple[str, int, int]) -> ast.Module:
    return ast.parse(Path(stamp[0]).read_text(encoding="utf-8"), filename=stamp[0])


def import_graph() -> dict[str, set[str]]:
    """analysis module → the analysis modules it imports anywhere in its body (top level or inside functions);
    built once per run while no engine file changes (a fresh copy for each caller)."""
    stamps = tuple(_stamp(p) for p in _modules().values())
    return {name: set(deps) for name, deps in _import_graph(stamps).items()}


@functools.cache
def _import_graph(stamps: tuple[tuple[str, int, int], ...]) -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = parsed(path)
        deps: set[str] = set()
        for node in ast.walk(tree):
            base, *named = _imported(node, name, path.name == "__init__.py") or [""]
            # `from .x import y`: y may be a module (analysis.x.y) or a name in analysis.x; `from analysis.core
            # import paths` imports the module analysis.core.paths, not the package's own code
            if named and all(t in mods for t in named):
                base = ""
            for target in (base, *named):
                if target in mods and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_sees_function_level_imports():
    """The finder itself: a cycle closed by an import inside a function is a cycle."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
    src = "def f():\n    from .reachability import unreachable_ids\n    return unreachable_ids\n"
    node = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom))
    assert "analysis.reachability" in _imported(node, "analysis.bpe", False)
    up = next(
        n for n in ast.walk(ast.parse("from ..reachability import x\n")) if isinstance(n, ast.ImportFrom)
    )
    assert "analysis.reachability" in _imported(up, "analysis.pruning.orders", False)
    assert "analysis.reachability" in _imported(up, "analysis.pruning", True)  # from a package's __init__


def test_the_graph_covers_the_engine():
    graph = import_graph()
    assert {"analysis.cli", "analysis.methods.pruning.orders", "analysis.methods.undertrained.report"} <= set(
        graph
    )
    assert "analysis.model.models" in graph["analysis.methods.undertrained.verification"]
    assert (
        "analysis.adapt.fvt" in graph["analysis.methods.dynamic.model"]
        and "analysis.adapt.fvt" in graph["analysis.adapt.embeddings"]
    )
    # the model side's three jobs, lowest first: checkpoints (model) < adapting (adapt) < evaluating (evaluate)
    assert {"analysis.model.bpb", "analysis.adapt.vocab_map"} <= graph["analysis.adapt.warmup"]
    assert {"analysis.adapt.embeddings", "analysis.model.models"} <= graph["analysis.evaluate.model_check"]
    assert tier_of("analysis.evaluate.comparison") == "evaluate" and tier_of("analysis.adapt.omp") == "adapt"


#: The engine's tiers, lowest first (module-name prefixes; the longest prefix decides). A module may import its own
#: tier and any tier before it, never a later one. `analysis.errors` sits at the bottom so every tier can raise.
TIERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("analysis.errors",)),
    ("core", ("analysis.core",)),
    ("tokenizer", ("analysis.tokenizer",)),
    ("texts", ("analysis.texts",)),
    ("measure", ("analysis.measure",)),
    ("bpe", ("analysis.bpe",)),
    ("model", ("analysis.model",)),
    ("adapt", ("analysis.adapt",)),
    ("evaluate", ("analysis.evaluate",)),
    ("methods", ("analysis.methods",)),
    ("views", ("analysis.views",)),
    ("jobs", ("analysis.jobs",)),
    ("commands", ("analysis.commands",)),
    ("face", ("analysis", "analysis.cli", "analysis.__main__")),
)
#: The tiers that are engines: they never import a paper method (methods plug into them, not the reverse).
ENGINE_TIERS = ("core", "tokenizer", "texts", "measure", "bpe", "model", "adapt", "evaluate", "jobs")
#: Method → method imports that compose two methods openly: (importing method, imported method).
DECLARED_COMPOSITIONS: set[tuple[str, str]] = {
    ("pruning", "extension"),  # prune-then-extend / extend-then-prune (analysis.methods.pruning.prune_extend)
}
#: Edges that break a rule and that work in this branch removes; the test fails once one is gone (never stale).
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()


def tier_of(module: str) -> str:
    """The tier of an analysis module: the tier whose prefix is the longest one the module name starts with."""
    best, length = "", -1
    for tier, prefixes in TIERS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > length:
                best, length = tier, len(p)
    return best


def method_of(module: str) -> str | None:
    """The paper method a module belongs to (`analysis.methods.<method>…`), None outside analysis.methods."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "methods" else None


def rule_violations(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The import edges (importer, imported) that break a tier rule: a backward arrow (a lower tier importing a
    higher one), an engine importing a method, or a method importing another method outside the declared
    compositions."""
    rank = {tier: i for i, (tier, _) in enumerate(TIERS)}
    bad: set[tuple[str, str]] = set()
    for a, deps in graph.items():
        for b in deps:
            ta, tb = tier_of(a), tier_of(b)
            if rank[tb] > rank[ta] or (ta in ENGINE_TIERS and tb == "methods"):
                bad.add((a, b))
            ma, mb = method_of(a), method_of(b)
            if ma and mb and ma != mb and (ma, mb) not in DECLARED_COMPOSITIONS:
                bad.add((a, b))
    return bad


def test_the_tier_rules_catch_each_kind_of_violation():
    """The checker itself: a backward arrow, an engine (even one above the methods) importing a method, and an
    undeclared method-to-method import are violations; a declared composition and a downward arrow are not."""
    graph = {
        "analysis.core.paths": {"analysis.tokenizer.tokenizer", "analysis.errors"},
        "analysis.jobs.stats": {"analysis.methods.sabpe.sabpe", "analysis.bpe.training"},
        "analysis.methods.reuse.reuse": {"analysis.methods.dynamic.dynamic", "analysis.adapt.fvt"},
        "analysis.methods.pruning.prune_extend": {"analysis.methods.extension.plan"},
        "analysis.commands.prune": {"analysis.methods.pruning", "analysis.jobs"},
    }
    assert rule_violations(graph) == {
        ("analysis.core.paths", "analysis.tokenizer.tokenizer"),
        ("analysis.jobs.stats", "analysis.methods.sabpe.sabpe"),
        ("analysis.methods.reuse.reuse", "analysis.methods.dynamic.dynamic"),
    }
    assert tier_of("analysis") == "face" and tier_of("analysis.cli") == "face"
    assert tier_of("analysis.methods.pruning.orders") == "methods" and method_of("analysis.bpe.stt") is None


def test_every_engine_module_lies_in_a_tier():
    """No module is left beside the tier folders: only the face (`load`, the errors, the CLI) is at the top."""
    graph = import_graph()
    assert not [m for m in graph if not tier_of(m)]
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py", "errors.py"], (
        f"modules outside a tier folder: {top}"
    )
    assert {tier for tier, _ in TIERS} == {tier_of(m) for m in graph}, "a tier without modules"


def test_the_engine_obeys_the_tier_rules():
    """No backward arrow, no engine importing a method, no undeclared method-to-method import."""
    found = rule_violations(import_graph())
    new = sorted(found - KNOWN_VIOLATIONS)
    assert not new, f"imports that break the tier rules (see TIERS in {Path(__file__).name}): {new}"
    gone = sorted(KNOWN_VIOLATIONS - found)
    assert not gone, f"these violations are gone: delete them from KNOWN_VIOLATIONS: {gone}"


def test_core_knows_no_tokenizer():
    """The core imports no tokenizer code: nothing from the other tiers, and no tokenizer library."""
    libraries = {"tokenizers", "transformers", "sentencepiece", "tiktoken", "gguf", "torch"}
    graph = import_graph()
    for name, path in _modules().items():
        if tier_of(name) != "core":
            continue
        assert {tier_of(d) for d in graph[name]} <= {"core", "errors"}, (name, graph[name])
        tree = parsed(path)
        used = {
            n.split(".")[0]
            for node in ast.walk(tree)
            for n in (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
        }
        assert not used & libraries, (name, used & libraries)


def test_every_method_has_the_skeleton():
    """Each paper method is a package with a public API (`__init__.py` with `__all__`)."""
    methods = sorted(p for p in (PACKAGE / "methods").iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert {p.name for p in methods} >= {"extension", "pruning", "reuse", "sabpe", "dynamic", "undertrained"}
    for p in methods:
        init = p / "__init__.py"
        assert init.is_file(), p
        assert "__all__" in init.read_text(encoding="utf-8"), (
            f"{init.relative_to(ROOT)}: no public API (__all__)"
        )


def test_no_import_cycle_in_analysis():
    cycles = {frozenset(c) for c in import_cycles(import_graph())}
    new = [sorted(c) for c in cycles - KNOWN_CYCLES]
    assert not new, f"import cycles among analysis modules: {new}"
    gone = [sorted(c) for c in KNOWN_CYCLES - cycles]
    assert not gone, f"these cycles are gone: delete them from KNOWN_CYCLES in {Path(__file__).name}: {gone}"


def _private_regex_uses(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    found = [f"{path.name}: mentions _regex_core"] if "_regex_core" in text else []
    tree = parsed(path)
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "regex":
                    aliases.add(a.asname or "regex")
                elif a.name.startswith("regex."):
                    found.append(f"{path.name}:{node.lineno}: import {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.startswith("regex."):
                found.append(f"{path.name}:{node.lineno}: from {node.module} import …")
            elif node.module == "regex":
                found += [
                    f"{path.name}:{node.lineno}: from regex import {a.name}"
                    for a in node.names
                    if a.name.startswith("_")
                ]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
        ):
            found.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_private_regex_finder(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import regex as re2\nfrom regex import _regex_core\nx = re2._cache\n", encoding="utf-8")
    uses = _private_regex_uses(bad)
    assert any("_regex_core" in u for u in uses) and any("re2._cache" in u for u in uses)
    good = tmp_path / "good.py"
    good.write_text("import regex\nX = regex.compile(r'\\p{Script=Latin}')\n", encoding="utf-8")
    assert _private_regex_uses(good) == []


def test_no_private_regex_api_in_analysis():
    uses = [u for p in sorted(PACKAGE.rglob("*.py")) for u in _private_regex_uses(p)]
    assert not uses, uses


#: The page layer's functions stay short (issue 11: widgets → one engine call → charts, shared parts in ui/).
MAX_PAGE_FUNCTION_LINES = 120


def _function_lengths(path: Path) -> list[tuple[str, int]]:
    tree = parsed(path)
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_page_layer_functions_are_short():
    files = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").glob("*.py"))]
    assert len(files) > 10
    long = [
        f"{p.relative_to(ROOT)}:{name} ({n} lines)"
        for p in files
        for name, n in _function_lengths(p)
        if n > MAX_PAGE_FUNCTION_LINES
    ]
    assert not long, long


def test_engine_does_not_import_streamlit():
    users = []
    for path in _modules().values():
        tree = parsed(path)
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            if any(n == "streamlit" or n.startswith("streamlit.") for n in names):
                users.append(str(path.relative_to(ROOT)))
    assert not users, users


def test_corpus_jobs_plug_methods_in_through_their_registry():
    """The statistics a method contributes are named in one registry (analysis.jobs.job_stats.PLUGINS), each a Stat
    of that method's package whose name is its key; the job engine imports none of them."""
    assert set(job_stats.PLUGINS) == {"token-ids", "merge-counts", "source-words"}
    assert set(job_stats.STATS) == set(job_stats.PLUGINS) | {
        "pretokens",
        "words",
        "produced-ids",
        "compression",
    }
    for name, where in job_stats.PLUGINS.items():
        assert method_of(where.split(":")[0]), where
        stat = job_stats.get_stat(name)
        assert isinstance(stat, Stat) and stat.name == name
    assert not any(
        tier_of(d) == "methods" for m, deps in import_graph().items() if tier_of(m) == "jobs" for d in deps
    )


#: An engine file longer than this says at its top why it is one file.
MAX_ENGINE_FILE_LINES = 600


def test_long_engine_files_say_why_they_are_one_file():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_ENGINE_FILE_LINES:
            doc = ast.get_docstring(parsed(path)) or ""
            if "Why one file" not in doc:
                long.append(f"{path.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    assert not long, f"split these files or say at their top why they are one file: {long}"


def _page_layer() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").glob("*.py"))]


def test_one_zip_writer():
    """Every zip the app offers is built by analysis.tokenizer.export.zip_files."""
    writers = [
        str(p.relative_to(ROOT))
        for p in [*sorted(PACKAGE.rglob("*.py")), *_page_layer()]
        if re.search(r"ZipFile\([^)]*[\"']w[\"']", p.read_text(encoding="utf-8"))
    ]
    assert writers == ["analysis/tokenizer/export.py"], writers


def test_one_bounded_line_reader():
    """Text is cut into lines in one place, analysis.core.inputs.bounded_lines (strict UTF-8, a byte budget, long
    lines in pieces): local files, uploads, zip members and corpus shards all read through it."""
    readers = [
        str(p.relative_to(ROOT))
        for p in [*sorted(PACKAGE.rglob("*.py")), *_page_layer()]
        if re.search(r"TextIOWrapper\(|\.readline\(", p.read_text(encoding="utf-8"))
    ]
    assert readers == ["analysis/core/inputs.py"], readers


def test_pages_write_json_one_way():
    """A page offers JSON through analysis.core.outputs.json_document (or json_lines for a table), never its own
    json.dumps / strict_json."""
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p in _page_layer()
        for m in re.finditer(r"json\.dumps\(|strict_json\(|json_ready\(", p.read_text(encoding="utf-8"))
    ]
    assert not found, found


def test_no_hand_rolled_caches_beside_memoize():
    """The engine remembers results through analysis.core.cache (memoize, DiskCache), not module-level dicts that
    a function fills (the three it had: premiums, working tokenizers, job tokenizers)."""
    filled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "core" and path.name == "cache.py":
            continue
        text = path.read_text(encoding="utf-8")
        for name in re.findall(r"^(_[A-Z][A-Z_]*): dict\[[^\n]*\] = \{\}$", text, re.M):
            if re.search(rf"{name}\[[^\]]+\] = ", text):
                filled.append(f"{path.relative_to(ROOT)}: {name}")
    assert not filled, filled


def test_sub_command_choices_come_from_registries():
    """A sub-command's `choices=` names an engine registry (the same one its page offers), never a hand-written
    list of two or more names that a page could disagree with (as `_CLI_ORDERS` once did)."""
    literal = []
    for path in sorted((PACKAGE / "commands").glob("*.py")):
        for node in ast.walk(parsed(path)):
            for kw in node.keywords if isinstance(node, ast.Call) else []:
                v = kw.value
                if kw.arg == "choices" and isinstance(v, (ast.Tuple, ast.List)) and len(v.elts) >= 2:
                    if all(isinstance(e, ast.Constant) for e in v.elts):
                        literal.append(f"{path.relative_to(ROOT)}:{v.lineno}")
    assert not literal, literal


TESTS = ROOT / "tests"
#: Where AppTests live: the page tests together, plus the browser tests and the hostile-input walks over every page.
APPTEST_HOMES = ("app", "e2e", "badinput")
#: Test files outside those folders that still run AppTests, each with the reason.
APPTEST_ELSEWHERE = {
    "tests/conftest.py": "runs no AppTest: makes every AppTest of a process share compiled page bytecode",
    "tests/bpe/test_parity.py": "test_compression_page_section: not yet moved to tests/app/",
    "tests/commands/test_cli_inspect.py": "test_page_download_is_the_cli_json: not yet moved to tests/app/",
    "tests/model/test_demo_models.py": "its demo-model page tests: not yet moved to tests/app/",
    "tests/views/test_gallery.py": "test_gallery_page_reads_the_store_and_never_computes: not yet moved to tests/app/",
}


def _uses_apptest(path: Path) -> bool:
    """The file imports streamlit.testing or names `AppTest` in code (docstrings and comments do not count)."""
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamlit.testing"):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith("streamlit.testing") for a in node.names):
            return True
        if isinstance(node, ast.Name) and node.id == "AppTest":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "AppTest":
            return True
    return False


def test_apptests_live_in_tests_app():
    """The tests mirror the package (tests/<tier>/, tests/methods/<method>/) and the page tests are together in
    tests/app/: no other test file runs a Streamlit AppTest, except the browser and hostile-input folders and the
    files listed (with their reason) in APPTEST_ELSEWHERE."""
    # the finder sees an AppTest where there is one
    assert _uses_apptest(TESTS / "app" / "test_dynamic_page.py")
    found = {
        str(path.relative_to(ROOT))
        for path in sorted(TESTS.rglob("*.py"))
        if path.relative_to(TESTS).parts[0] not in APPTEST_HOMES
        and path != Path(__file__).resolve()
        and _uses_apptest(path)
    }
    assert found == set(APPTEST_ELSEWHERE), (
        f"move these AppTests to tests/app/: {sorted(found - set(APPTEST_ELSEWHERE))}; "
        f"no longer AppTests, drop them from APPTEST_ELSEWHERE: {sorted(set(APPTEST_ELSEWHERE) - found)}"
    )
