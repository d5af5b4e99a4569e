"""trace_gym's import graph: no circle between modules or packages, imports only go down the layers,
no private name crosses a subsystem; no module over 600 lines, no function over 120.

Every module's imports are read with :mod:`ast` (imports inside functions included, so a
lazy import that only hides a circle still counts).  An edge goes to the module that holds
the imported name (``from a import b`` is an edge to ``a.b`` when ``b`` is a submodule, else
to ``a``).  A package's ``__init__`` importing its own submodules counts like any other import,
so a submodule that takes a name from its own package's ``__init__`` closes a circle.

A *subsystem* is a top-level module or package of ``trace_gym`` (``rollout``, ``tau2``,
``toolsandbox``, ...): a ``_private`` name may be imported within a subsystem, never
across two.  :data:`LAYERS` is the order the subsystems stand in, the command line on top and
core at the bottom: an import may stay in its layer or go down, never up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import trace_gym

ROOT = Path(trace_gym.__file__).resolve().parent

# Exceptions would be listed here, each with its reason; there are none.
ALLOWED_CYCLES: set[frozenset[str]] = set()
ALLOWED_PRIVATE: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = ("trace_gym",) + path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(module: str, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target> import ...`` written in ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".") if _is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports(module: str) -> list[tuple[str, str | None]]:
    """``(module imported, name taken from it or None)`` for every import in ``module``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node.level, node.module)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                out.append((sub, None) if sub in MODULES else (source, alias.name))
    return [(m, n) for m, n in out if m.split(".")[0] == "trace_gym"]


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for target, _ in imports(module):
            while target not in MODULES and "." in target:  # ``import a.b.c`` of a non-module attribute
                target = target.rsplit(".", 1)[0]
            if target == module or target not in MODULES:
                continue
            edges[module].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def _subsystem(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def private_imports() -> list[tuple[str, str]]:
    """``(importer, module.name)`` for each ``_private`` name imported across subsystems."""
    out = []
    for module in MODULES:
        for source, name in imports(module):
            if name and name.startswith("_") and not name.startswith("__"):
                if _subsystem(source) != _subsystem(module):
                    out.append((module, f"{source}.{name}"))
    return sorted(set(out))


def test_the_reader_sees_lazy_imports_and_submodules():
    # A function-level import is read (demo.runner imports the pipeline inside a function).
    assert any(t.startswith("trace_gym.pipeline") for t in graph()["trace_gym.demo.runner"])
    assert _resolve("trace_gym.policies.hf", 1, "decoding") == "trace_gym.policies.decoding"
    assert _resolve("trace_gym.policies", 1, "hf") == "trace_gym.policies.hf"
    assert _resolve("trace_gym.tau2.domains.airline", 2, "db") == "trace_gym.tau2.db"
    toy = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(toy) == [["a", "b", "c"]]


def test_no_import_circle():
    found = [c for c in cycles(graph()) if frozenset(c) not in ALLOWED_CYCLES]
    assert found == []


def test_no_private_name_crosses_a_subsystem():
    found = [p for p in private_imports() if p not in ALLOWED_PRIVATE]
    assert found == []


def test_no_module_over_600_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}


# The layers, top first.  Within a layer, packages may import one another as long as no circle forms.
LAYERS: list[set[str]] = [
    {"cli"},  # the command line
    {"demo", "compare"},  # front ends over the whole loop
    {"pipeline"},  # the loop's stages in order, their store
    {"analysis", "capabilities", "synthesis", "route", "eval"},  # TRACE's stages
    {"episode", "batching", "rollout", "train", "integrations", "baselines"},  # playing and learning
    {"tau2", "toolsandbox", "policies"},  # the benchmark engines and the models
    {"trace_gym", "core", "llm", "trajectory", "registration", "env_reference", "testing", "adapters", "data", "io",
     "render", "compat", "progress"},  # foundations: the env contract, chat clients, files, formatting
]


def package_circles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """The groups of packages (subsystems) that reach one another through imports, lazy ones included."""
    pkg: dict[str, set[str]] = {}
    for a, targets in edges.items():
        for b in targets:
            if _subsystem(a) != _subsystem(b):
                pkg.setdefault(_subsystem(a), set()).add(_subsystem(b))
    reach = {p: set(ts) for p, ts in pkg.items()}
    changed = True
    while changed:  # transitive closure (a few dozen packages)
        changed = False
        for p in reach:
            more = set().union(*(reach.get(q, set()) for q in reach[p])) - reach[p]
            if more:
                reach[p] |= more
                changed = True
    return {frozenset({p} | {q for q in reach[p] if p in reach.get(q, set())}) for p in reach if p in reach[p]}


def test_no_circle_between_packages():
    toy = {"x.a.m": {"x.b.m"}, "x.b.m": {"x.c.m"}, "x.c.m": {"x.a.m"}, "x.d.m": {"x.a.m"}}
    assert package_circles(toy) == {frozenset({"a", "b", "c"})}
    assert package_circles(graph()) == set()


def _layer(subsystem: str) -> int:
    for depth, layer in enumerate(LAYERS):
        if subsystem in layer:
            return depth
    raise AssertionError(f"{subsystem!r} is in no layer of LAYERS: place it there")


def test_imports_only_go_down_the_layers():
    up = sorted((a, b) for a, targets in graph().items() for b in targets
                if _layer(_subsystem(b)) < _layer(_subsystem(a)))
    assert up == []
    assert {_subsystem(m) for m in MODULES} == set().union(*LAYERS)  # no layer names a package that is gone


def test_no_function_over_120_lines():
    long = {}
    for m, p in MODULES.items():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 120:
                long[f"{m}.{node.name}"] = node.end_lineno - node.lineno + 1
    assert long == {}
