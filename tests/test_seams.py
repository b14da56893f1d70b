"""Seams between modules: no module reaches into another's private names, ``ares_rerank`` has no import cycle, and
the rooms import only the rooms below them (:data:`LAYERS`).

Both checks read the source with :mod:`ast` (nothing is imported or run), so they are cheap and offline.

**Private names** (single leading underscore, not dunder) belong to the module, class hierarchy or object that
defines them. A module that needs one from elsewhere needs a public name instead. Flagged, per file under
``ares_rerank/``, ``eval/`` and ``training/``:

- ``from m import _x``;
- ``m._x`` where ``m`` is bound by an import (a module, or a class / function imported from another module);
- ``obj._x`` on any other object (a local, an attribute, a call result) when this module defines no ``_x`` of its
  own: ``self._x`` / ``cls._x`` / ``super()._x`` are the class's own business, and a module that defines ``_x``
  (a method, a ``self._x = ...``, a module-level name) may reach it on its own objects. An approximation: the
  AST does not know types, so an object of another class that happens to share a private name is not seen.

Overriding a hook of a third-party class (``def _get_train_sampler(self, ...)`` in a ``Trainer`` subclass) is a
definition, not an access, and is never flagged.

**Import cycles**: every import of an ``ares_rerank`` module by another, including imports inside functions (which
hide a cycle at import time but not from the reader), is an edge; any cycle fails the test and is printed. An edge
goes to the module named (``from pkg import sub`` to ``pkg.sub`` when that is a module, else to ``pkg``); running a
package's ``__init__`` on the way to a submodule is not counted as an edge, or every submodule would depend on all
the siblings its package re-exports.
"""

from __future__ import annotations

import ast
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("ares_rerank", "eval", "training")
PACKAGE = "ares_rerank"

# Third-party private names we must touch (each unavoidable, each in the files named): name -> why.
ALLOWED_PRIVATE = {
    # training/head.py reads the dests of HfArgumentParser's actions: argparse keeps them only in ``_actions``.
    "_actions": "argparse has no public list of a parser's actions",
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _python_files() -> list[Path]:
    files = []
    for folder in SCANNED:
        files.extend(p for p in sorted((ROOT / folder).rglob("*.py")) if "__pycache__" not in p.parts)
    return files


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _own_private_names(tree: ast.AST) -> set[str]:
    """Private names this module defines: functions, classes, assignments (plain, to ``self.x`` / ``cls.x``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Name, ast.arg)):
            name = node.id if isinstance(node, ast.Name) else node.arg
            if isinstance(node, ast.arg) or isinstance(node.ctx, ast.Store):
                names.add(name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
    return {n for n in names if _is_private(n)}


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_own_object(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the private name belongs to this class hierarchy."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def private_offenders(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line what`` for each reach into another module's private names (see the module docstring)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(root)
    imported: set[str] = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                imported.add(alias.asname or alias.name)
                if _is_private(alias.name) and alias.name not in ALLOWED_PRIVATE:
                    source = "." * node.level + (node.module or "")
                    out.append(f"{rel}:{node.lineno} from {source} import {alias.name}")
    own = _own_private_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr) or node.attr in ALLOWED_PRIVATE:
            continue
        if _is_own_object(node.value):
            continue
        root = _root_name(node.value)
        if root in imported or node.attr not in own:
            found.append((node.lineno, f"{rel}:{node.lineno} {ast.unparse(node)}"))
    return out + [line for _, line in sorted(found)]


def import_graph() -> dict[str, set[str]]:
    """``ares_rerank`` module -> the ``ares_rerank`` modules it imports anywhere in its source."""
    paths = {_module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py")) if "__pycache__" not in p.parts}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(name, is_package, node)
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in paths else source for a in node.names]
            graph[name].update(t for t in targets if t in paths and t != name)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, component) for component in components]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, inside the component (breadth-first search)."""
    start = min(component)
    parent: dict[str, str] = {start: start}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:  # back at the start: walk the parents from v
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return path[::-1] + [start]
                if w not in parent:
                    parent[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"{sorted(component)} is not strongly connected")  # Tarjan's components always are


def test_no_module_reaches_into_another_modules_private_names():
    offenders = [line for path in _python_files() for line in private_offenders(path)]
    assert not offenders, "private names used across modules (give them a public name):\n" + "\n".join(offenders)


# -- the rooms and their order --------------------------------------------------------------------------------------
# The pipeline, bottom up: a module imports only modules of its own layer or lower ones (docs/STYLE order:
# utils <- chain <- estimator / backbones <- scoring <- rerank <- rewards / search <- training / evaluation <-
# commands). A prefix names a module and everything below it.
LAYERS = (
    ("utils", ("ares_rerank.utils",)),
    ("text", ("ares_rerank.chain", "ares_rerank.chat_templates", "ares_rerank.calibration", "ares_rerank.data")),
    ("estimator and backbones", ("ares_rerank.estimator", "ares_rerank.backbones")),
    ("scoring", ("ares_rerank.scoring", "ares_rerank.baselines", "ares_rerank.aggregate", "ares_rerank.engines")),
    ("rerank", ("ares_rerank.rerank",)),
    ("rewards, search, viewer", ("ares_rerank.rewards", "ares_rerank.search", "ares_rerank.viewer",
                                 "ares_rerank.streaming", "ares_rerank.verl")),
    ("training and evaluation", ("ares_rerank.training", "ares_rerank.evaluation")),
    ("commands", ("ares_rerank.commands", "ares_rerank.cli", "ares_rerank.distributed")),
)
# Arrows that run up, each on purpose: (from, to) -> why. Imported inside a function, never at import time.
UPWARD_ALLOWED = {
    ("ares_rerank.chain", "ares_rerank.viewer"): "ChainScores._repr_html_ draws itself with the viewer, imported "
                                                  "when a notebook displays one",
    ("ares_rerank.rerank.records", "ares_rerank.viewer"): "Ranking._repr_html_ (what AresReranker.rank returns) "
                                                           "draws itself with the viewer, when a notebook shows one",
}


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of ``module`` (the package's own ``__init__`` sits above them all)."""
    if module == PACKAGE:
        return len(LAYERS)
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def layer_offenders(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for every import from a lower layer to a higher one, of a module in no layer, of ``utils`` into
    the package, of the estimator into a backbone module other than the protocol (``backbones/base.py``), and of
    ``commands/`` by anything but ``cli.py`` and ``commands/`` itself."""
    out = []
    for source, targets in sorted(graph.items()):
        if layer_of(source) is None:
            out.append(f"{source}: in no layer of LAYERS (put it in a room)")
            continue
        for target in sorted(targets):
            edge = (source, target)
            if edge in UPWARD_ALLOWED:
                continue
            if layer_of(target) > layer_of(source):
                out.append(f"{source} -> {target}: from {LAYERS[layer_of(source)][0]} up to "
                           f"{LAYERS[layer_of(target)][0]}")
            elif source.startswith("ares_rerank.utils.") and not target.startswith("ares_rerank.utils"):
                out.append(f"{source} -> {target}: utils/ imports nothing of the package")
            elif (source.startswith("ares_rerank.estimator") and target.startswith("ares_rerank.backbones")
                  and target != "ares_rerank.backbones.base"):
                out.append(f"{source} -> {target}: the estimator reads only the backbone protocol (backbones/base.py)")
            elif (target.startswith("ares_rerank.commands") and not source.startswith("ares_rerank.commands")
                  and source not in ("ares_rerank.cli", "ares_rerank.distributed")):
                out.append(f"{source} -> {target}: only cli.py imports commands/")
    return out


def test_rooms_import_only_the_rooms_below_them():
    offenders = layer_offenders(import_graph())
    assert not offenders, "imports against the pipeline's order (tests/test_seams.py LAYERS):\n" + "\n".join(offenders)


def test_the_layer_check_fails_on_a_planted_upward_import():
    graph = import_graph()
    planted = {**graph, "ares_rerank.utils.io": graph["ares_rerank.utils.io"] | {"ares_rerank.rerank.reranker"},
               "ares_rerank.estimator.batch": graph["ares_rerank.estimator.batch"] | {"ares_rerank.backbones.nli"},
               "ares_rerank.rerank.reranker": graph["ares_rerank.rerank.reranker"] | {"ares_rerank.commands.rank"},
               "ares_rerank.newflat": set()}
    found = layer_offenders(planted)
    assert "ares_rerank.utils.io -> ares_rerank.rerank.reranker: from utils up to rerank" in found
    assert any(line.startswith("ares_rerank.estimator.batch -> ares_rerank.backbones.nli") for line in found)
    assert any(line.startswith("ares_rerank.rerank.reranker -> ares_rerank.commands.rank") for line in found)
    assert "ares_rerank.newflat: in no layer of LAYERS (put it in a room)" in found


def test_ares_rerank_has_no_import_cycle():
    graph = {source: {t for t in targets if (source, t) not in UPWARD_ALLOWED} for source, targets in
             import_graph().items()}
    cycles = find_cycles(graph)
    assert not cycles, "import cycles (imports inside functions count):\n" + "\n".join(
        " -> ".join(cycle) for cycle in cycles
    )


# -- the checks themselves ------------------------------------------------------------------------------------------
def test_private_check_flags_each_kind_of_reach(tmp_path):
    source = (
        "import os\n"
        "from pkg.mod import _hidden, public\n"
        "class A(Base):\n"
        "    def _own(self):\n"
        "        return self._own() or super()._hook() or cls._x\n"
        "    def _hook(self):\n"  # overriding a hook is a definition
        "        return None\n"
        "def f(obj, other):\n"
        "    obj._own()\n"  # this module defines _own: allowed
        "    other._fit()\n"  # nobody here defines _fit: flagged
        "    os._exit(0)\n"  # private name of an imported module: flagged
        "    public._cache\n"  # of an imported object: flagged
        "    return parser._actions\n"  # allow-listed
    )
    (tmp_path / "m.py").write_text(source)
    found = private_offenders(tmp_path / "m.py", root=tmp_path)
    assert found == ["m.py:2 from pkg.mod import _hidden", "m.py:10 other._fit", "m.py:11 os._exit",
                     "m.py:12 public._cache"]


def test_cycle_check_prints_one_shortest_cycle_per_tangle():
    graph = {"a": {"b", "d"}, "b": {"c"}, "c": {"a"}, "d": {"b"}, "e": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_backbone_loading_and_its_shared_helpers_import_no_backbone_module():
    graph = import_graph()
    assert graph["ares_rerank.backbones.devices"] == set()  # device / dtype
    assert all(m.startswith("ares_rerank.utils.") for m in graph["ares_rerank.utils.io"])  # file helpers: a leaf
    assert graph["ares_rerank.utils.checks"] == set()
    assert graph["ares_rerank.chain"] <= {"ares_rerank.utils.io", "ares_rerank.viewer"}  # JSONL read; notebook view
    assert graph["ares_rerank.calibration"] <= {"ares_rerank.utils.io", "ares_rerank.utils.checks"}  # the file format
    assert graph["ares_rerank.estimator.config"] <= {"ares_rerank.chain", "ares_rerank.utils.checks"}
    assert graph["ares_rerank.backbones.hub"] == {"ares_rerank.backbones.devices", "ares_rerank.utils.io",
                                                  "ares_rerank.calibration"}
    # the cache keys pairs after premise selection, checked by the protocol module's check_pairs (a leaf)
    assert graph["ares_rerank.backbones.base"] == set()
    assert graph["ares_rerank.backbones.cache"] <= {"ares_rerank.backbones.selection", "ares_rerank.backbones.base"}
    assert graph["ares_rerank.backbones.loading"] == {"ares_rerank.backbones.hub",  # kinds are imported lazily
                                                      "ares_rerank.backbones.devices"}


# -- what users import keeps importing -------------------------------------------------------------------------------
# ares_rerank.__all__ before the package had rooms (main 020d0c2), and the module paths the README and docs name.
PUBLIC_BEFORE_ROOMS = (
    "AGGREGATES", "METHODS", "AresConfig", "AresFilter", "AresReranker", "AresReward", "AsyncAresReward", "Backbone",
    "BestOfN", "Chain", "ChainBackbone", "ChainScores", "ClaimTreesOracle", "DemoBackboneWarning", "FunctionBackbone",
    "SelectingBackbone", "__version__", "aggregate_scores", "best_of_n", "filter_completions", "load_backbone",
    "sample_size", "score_chains", "split_sentences", "split_steps",
)
DOCUMENTED_PATHS = (
    ("ares_rerank.rerank", "AresReranker"), ("ares_rerank.rewards", "ares_reward"),
    ("ares_rerank.rewards", "async_ares_reward"), ("ares_rerank.rewards", "AresReward"),
    ("ares_rerank.rewards", "configure_default"), ("ares_rerank.verl", "compute_score"),
    ("ares_rerank.verl", "async_compute_score"), ("ares_rerank.verl", "AresDenseRewardManager"),
    ("ares_rerank.streaming", "AresStream"), ("ares_rerank.estimator", "AresStream"),
    ("ares_rerank.estimator", "AresConfig"), ("ares_rerank.estimator", "ares_scores"),
    ("ares_rerank.distributed", "main"), ("ares_rerank.backbones", "load_backbone"),
    ("ares_rerank.search", "beam_search"), ("ares_rerank.search", "dvts"),
)


def test_every_name_users_imported_before_the_rooms_still_imports():
    import importlib

    import ares_rerank

    assert sorted(ares_rerank.__all__) == sorted(PUBLIC_BEFORE_ROOMS)
    assert all(getattr(ares_rerank, name) is not None for name in PUBLIC_BEFORE_ROOMS)
    missing = [f"{module}.{name}" for module, name in DOCUMENTED_PATHS
               if not hasattr(importlib.import_module(module), name)]
    assert not missing, f"documented paths that no longer import: {missing}"
