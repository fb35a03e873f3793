"""The house's import rules (shared/ARCHITECTURE.md), read from the source with ``ast``:

- ``book`` imports torch, numpy, tiktoken and the standard library, and no other wing;
- nothing outside ``native`` imports its modules, only its face (``explorer.native``);
- nothing imports ``app``;
- no wing but ``app`` imports gradio or plotly;
- no module of ``explorer`` imports itself through others (an import cycle).
"""
import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "explorer"
WINGS = ("book", "probes", "runtime", "native", "app")
BOOK_MAY_IMPORT = {"torch", "numpy", "tiktoken"}
UI_LIBRARIES = {"gradio", "gradio_client", "plotly"}


def imports_of(path: Path, source: str | None = None) -> list[str]:
    """Absolute module names that ``path`` (or ``source`` as if it were there) imports, relative
    imports resolved."""
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name == "__init__.py":
        module = module.rsplit(".", 1)[0]
        package = module
    else:
        package = module.rsplit(".", 1)[0]
    names = []
    source = path.read_text() if source is None else source
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            names.append(prefix)
            # "from explorer import native" names a submodule, too
            names += [f"{prefix}.{alias.name}" for alias in node.names]
    return names


def wing_of(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 and parts[0] in WINGS else None


def violations(path: Path, names: list[str]) -> list[str]:
    wing = wing_of(path)
    found = []
    for name in names:
        top = name.split(".")[0]
        parts = name.split(".")
        target = parts[1] if top == "explorer" and len(parts) > 1 else None
        if target in WINGS and target != wing and not _is_existing_module(name):
            continue       # "from explorer import X" where X is a name, not a module
        if wing == "book":
            if top == "explorer" and target != "book":
                found.append(f"the book imports {name}")
            elif (top != "explorer" and top not in BOOK_MAY_IMPORT
                  and top not in sys.stdlib_module_names):
                found.append(f"the book imports {name}")
        if target == "app" and wing != "app":
            found.append(f"{name} is imported from outside the app")
        if target == "native" and wing != "native" and len(parts) > 2 and _is_existing_module(name):
            found.append(f"{name} reaches behind native's face")
        if top in UI_LIBRARIES and wing != "app":
            found.append(f"a core wing imports {top}")
    return found


def _is_existing_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def all_sources():
    return sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", all_sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_keeps_the_import_rules(path):
    assert violations(path, imports_of(path)) == []


def test_every_module_lives_in_a_wing():
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert loose == []
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__") \
        == sorted(WINGS)


@pytest.mark.parametrize("wing, line, complaint", [
    ("book", "from ..runtime.build import build_model", "the book imports explorer.runtime"),
    ("book", "import gradio", "a core wing imports gradio"),
    ("book", "import plotly.graph_objects as go", "the book imports plotly.graph_objects"),
    ("book", "from explorer.native import model_step", "the book imports explorer.native"),
    ("probes", "from ..native.decode import model_step", "reaches behind native's face"),
    ("runtime", "from explorer.app import shared", "is imported from outside the app"),
    ("runtime", "import plotly", "a core wing imports plotly"),
    ("probes", "from ..app.plots import percent", "is imported from outside the app"),
])
def test_a_forbidden_import_is_caught(wing, line, complaint):
    # A module of that wing, read by the same rules as the real ones.
    path = PACKAGE / wing / "_forbidden_import_probe.py"
    names = imports_of(path, line)
    assert any(complaint in v for v in violations(path, names)), violations(path, names)


def test_allowed_imports_pass():
    for wing, line in [("probes", "from .. import native"),
                       ("runtime", "from ..book.model import GPTModel"),
                       ("app", "import gradio as gr"),
                       ("native", "from ..book.probe_points import is_recording"),
                       ("book", "import torch.nn.functional as F")]:
        path = PACKAGE / wing / "_allowed_import_probe.py"
        assert violations(path, imports_of(path, line)) == []


MAX_CORE_LINES = 450   # the app is being rewritten; its modules are held to this later


@pytest.mark.parametrize("path", [p for p in all_sources() if wing_of(p) not in (None, "app")],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_core_module_has_one_job_and_fits_on_a_few_screens(path):
    assert len(path.read_text().splitlines()) <= MAX_CORE_LINES


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(sources: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Module -> the explorer modules it imports (at any depth of its code, a lazy import
    inside a function too). ``sources``: module name -> source, instead of the files."""
    if sources is None:
        sources = {module_name(p): p.read_text() for p in all_sources()}
    graph = {}
    for module, source in sources.items():
        path = ROOT.joinpath(*module.split("."))
        path = path / "__init__.py" if (path / "__init__.py").exists() else path.with_suffix(".py")
        # ("from . import sibling" names the package too: a module's own package is always
        # loaded before it, so that is no edge of a cycle)
        parent = module.rsplit(".", 1)[0] if path.name != "__init__.py" else None
        graph[module] = {name for name in imports_of(path, source)
                         if name in sources and name not in (module, parent)}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each as a cycle's
    members in order of name."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_between_explorer_modules():
    # A package's __init__ importing its own modules is no cycle unless they import it back.
    assert import_cycles(import_graph()) == []


def test_an_import_cycle_is_caught():
    sources = {"explorer.runtime.cache": "from .store import materialize",
               "explorer.runtime.store": "from . import checkpoints",
               "explorer.runtime.checkpoints": "def f():\n    from .cache import ModelCache",
               "explorer.runtime.build": "from ..book.model import GPTModel"}
    assert import_cycles(import_graph(sources)) == [
        ["explorer.runtime.cache", "explorer.runtime.checkpoints", "explorer.runtime.store"]]


def test_the_entry_point_imports_the_apps_main():
    import importlib.util

    spec = importlib.util.spec_from_file_location("app_entry_point", ROOT / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)           # runs its imports; main() only under __main__
    from explorer.app.server import main
    assert module.main is main


# ---------------------------------------------------------------------------------------------
# No tab module imports another tab module (ARCHITECTURE, the app layer): what several tabs
# show lives in the session. (The before-stop hook checks the same, textually.)
TABS_DIR = PACKAGE / "app" / "tabs"


def tab_modules() -> tuple[str, ...]:
    """The page's tabs' modules (``explorer.app.tabs.TABS``), read from its source."""
    tree = ast.parse((TABS_DIR / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "TABS":
            return tuple(f"explorer.app.tabs.{elt.id}" for elt in node.value.elts)
    raise AssertionError("no TABS in explorer/app/tabs/__init__.py")


def other_tabs_imported(path: Path, source: str | None = None) -> list[str]:
    tabs = tab_modules()
    me = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return sorted({name for name in imports_of(path, source) if name in tabs and name != me})


@pytest.mark.parametrize("module", tab_modules())
def test_no_tab_module_imports_another_tab_module(module):
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    assert other_tabs_imported(path) == []


@pytest.mark.parametrize("line", ["from . import inside", "from .attention import Shown",
                                  "from ..tabs import inside",
                                  "import explorer.app.tabs.inside"])
def test_a_tab_importing_another_tab_is_caught(line):
    assert other_tabs_imported(TABS_DIR / "knockout.py", line) == ["explorer.app.tabs.inside"] \
        or other_tabs_imported(TABS_DIR / "knockout.py", line) == [
            "explorer.app.tabs.attention"]


def test_plots_never_import_torch():
    """Plots turn plain data into figures (ARCHITECTURE, data flow): what they show that needs
    the model's float type (a noise floor) comes with the probe's result."""
    plots = sorted((PACKAGE / "app" / "plots").rglob("*.py"))
    assert plots and [p.name for p in plots
                      if any(n.split(".")[0] == "torch" for n in imports_of(p))] == []
