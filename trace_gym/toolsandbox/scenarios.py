"""Typed, immutable views of the ToolSandbox scenarios (``scenarios/base_scenarios.jsonl``).

Everything is read once per path and cached.  Nested JSON payloads (world rows, target rows)
are deep-frozen (:mod:`trace_gym.toolsandbox.data`).  The tool catalogue (``tools.json``) is
read by :mod:`trace_gym.toolsandbox.catalog`.

Malformed data raises :class:`ScenarioError`, whose message names the file, the line (for the
JSONL file), the scenario and the field, e.g.
``base_scenarios.jsonl:3: scenario 'wifi_off': milestones[1].constraints[0].database: unknown database 'FOO'``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from trace_gym.data import toolsandbox_data_dir

from .data import Fields, FrozenDict, ScenarioError, freeze, json_isinstance, thaw

__all__ = [
    "COLUMN_KINDS",
    "CONSTRAINT_KINDS",
    "DATABASES",
    "WORLD_DATABASES",
    "automatic_guardrails",
    "ColumnSimilarity",
    "Constraint",
    "Extractor",
    "ExtractorOutput",
    "FrozenDict",
    "Guardrail",
    "Milestone",
    "Scenario",
    "ScenarioError",
    "TimeDependentValue",
    "freeze",
    "load_scenario",
    "load_scenarios",
    "parse_scenario",
    "thaw",
]

DATABASES: tuple[str, ...] = ("SANDBOX", "SETTING", "CONTACT", "MESSAGING", "REMINDER")
WORLD_DATABASES: tuple[str, ...] = DATABASES[1:]
CONSTRAINT_KINDS: frozenset[str] = frozenset(
    {"snapshot", "addition", "removal", "update", "tool_trace_dependant", "guardrail"}
)
COLUMN_KINDS: frozenset[str] = frozenset({"exact", "rouge_l", "contains", "one", "close", "tool_trace"})
_CASTS = frozenset({"float", "int"})
_NORMALIZATIONS = frozenset({"float_surface_forms"})
_FILL_TO = frozenset({"content", "tool_trace"})


# --------------------------------------------------------------------------- typed objects


@dataclass(frozen=True)
class ColumnSimilarity:
    """How one target column is compared: ``kind`` plus the optional per-name tolerances."""

    kind: str
    atol: FrozenDict | None = None


@dataclass(frozen=True)
class ExtractorOutput:
    """One value an extractor pulls out of a traced call ``{tool_name, arguments, result}``."""

    key: str
    path: tuple[str | int, ...]
    cast: str | None


@dataclass(frozen=True)
class Extractor:
    """A tool-trace extractor described as data (see the ToolSandbox data README, ``shared/toolsandbox/README.md``: the ten extractors)."""

    name: str
    outputs: tuple[ExtractorOutput, ...]
    normalization: str | None


@dataclass(frozen=True)
class Constraint:
    """One snapshot constraint of a milestone or minefield."""

    database: str
    similarity: str
    reference: int | None
    target_columns: tuple[str, ...]
    target_dtypes: FrozenDict
    target_rows: tuple[FrozenDict, ...]
    column_similarity: FrozenDict  # column -> ColumnSimilarity
    fill_to: str | None = None
    extractor: Extractor | None = None


@dataclass(frozen=True)
class Guardrail:
    """An automatic "database unchanged since milestone ``reference``" constraint."""

    database: str
    reference: int


@dataclass(frozen=True)
class Milestone:
    """A milestone (or minefield): constraints evaluated at one message index, plus guardrails."""

    index: int
    constraints: tuple[Constraint, ...]
    guardrail_database_list: tuple[str, ...]
    guardrail_database_exclusion_list: tuple[str, ...] | None
    guardrails: tuple[Guardrail, ...]


@dataclass(frozen=True)
class TimeDependentValue:
    """A clock-dependent value: JSON pointer ``path``, its ``value`` at the reference clock, ``expr``."""

    path: str
    value: Any
    expr: FrozenDict


@dataclass(frozen=True)
class Scenario:
    """One base scenario of ``base_scenarios.jsonl`` (field names follow the file)."""

    name: str
    source: str
    categories: tuple[str, ...]
    base_world: str
    max_messages: int
    tool_allow_list: tuple[str, ...] | None
    tool_deny_list: tuple[str, ...] | None
    agent_tools: tuple[str, ...]
    user_tools: tuple[str, ...]
    agent_system_prompt: str
    user_simulator_system_prompt: str
    user_simulator_task: str
    first_user_messages: tuple[str, ...]
    user_simulator_few_shot: tuple[FrozenDict, ...]
    sandbox: tuple[FrozenDict, ...]
    first_user_sandbox_message_index: int
    world: FrozenDict  # database -> tuple of rows
    milestones: tuple[Milestone, ...]
    minefields: tuple[Milestone, ...]
    milestone_edges: tuple[tuple[int, int], ...]
    minefield_edges: tuple[tuple[int, int], ...]
    milestone_edges_declared: tuple[tuple[int, int], ...] | None
    minefield_edges_declared: tuple[tuple[int, int], ...] | None
    augmentations: FrozenDict
    time_dependent_values: tuple[TimeDependentValue, ...]
    oracle_similarity: float | None

    def world_rows(self, database: str) -> list[dict[str, Any]]:
        """A fresh, mutable copy of the starting rows of ``database``."""
        return thaw(self.world.get(database, ()))

    def sandbox_rows(self) -> list[dict[str, Any]]:
        """A fresh, mutable copy of the initial message bus."""
        return thaw(self.sandbox)


# --------------------------------------------------------------------------- scenario parsing


def _parse_column_similarity(f: Fields, obj: Any, field: str) -> ColumnSimilarity:
    kind = f.get(obj, "kind", f"{field}.kind", str)
    if kind not in COLUMN_KINDS:
        raise f.fail(f"{field}.kind", f"unknown column similarity {kind!r} (expected one of {sorted(COLUMN_KINDS)})")
    atol = f.get(obj, "atol_dict", f"{field}.atol_dict", dict, optional=True)
    if atol is not None:
        for name, tol in atol.items():
            if not json_isinstance(tol, (int, float)):
                raise f.fail(f"{field}.atol_dict.{name}", f"expected a number, got {tol!r}")
    if kind == "close" and atol is None:
        raise f.fail(f"{field}.atol_dict", "a 'close' similarity needs atol_dict")
    extra = set(obj) - {"kind", "atol_dict"}
    if extra:
        raise f.fail(field, f"unexpected keys {sorted(extra)}")
    return ColumnSimilarity(kind=kind, atol=freeze(atol) if atol is not None else None)


def _parse_extractor(f: Fields, obj: Any, field: str) -> Extractor:
    name = f.get(obj, "name", f"{field}.name", str)
    outputs_raw = f.get(obj, "outputs", f"{field}.outputs", list)
    if not outputs_raw:
        raise f.fail(f"{field}.outputs", "an extractor needs at least one output")
    outputs = []
    for i, out in enumerate(outputs_raw):
        ofield = f"{field}.outputs[{i}]"
        key = f.get(out, "key", f"{ofield}.key", str)
        path = f.get(out, "path", f"{ofield}.path", list)
        for j, step in enumerate(path):
            if not json_isinstance(step, (str, int)):
                raise f.fail(f"{ofield}.path[{j}]", f"expected a string or an integer, got {step!r}")
        cast = f.get(out, "cast", f"{ofield}.cast", str, optional=True)
        if cast is not None and cast not in _CASTS:
            raise f.fail(f"{ofield}.cast", f"unknown cast {cast!r} (expected float, int or null)")
        outputs.append(ExtractorOutput(key=key, path=tuple(path), cast=cast))
    normalization = f.get(obj, "normalization", f"{field}.normalization", str, optional=True)
    if normalization is not None and normalization not in _NORMALIZATIONS:
        raise f.fail(f"{field}.normalization", f"unknown normalization {normalization!r}")
    return Extractor(name=name, outputs=tuple(outputs), normalization=normalization)


def _parse_constraint(f: Fields, obj: Any, field: str, n_nodes: int) -> Constraint:
    database = f.get(obj, "database", f"{field}.database", str)
    if database not in DATABASES:
        raise f.fail(f"{field}.database", f"unknown database {database!r} (expected one of {list(DATABASES)})")
    similarity = f.get(obj, "similarity", f"{field}.similarity", str)
    if similarity not in CONSTRAINT_KINDS:
        raise f.fail(
            f"{field}.similarity", f"unknown similarity {similarity!r} (expected one of {sorted(CONSTRAINT_KINDS)})"
        )
    reference = f.get(
        obj, "reference_milestone_node_index", f"{field}.reference_milestone_node_index", int, optional=True
    )
    if reference is not None and not -1 <= reference < n_nodes:
        raise f.fail(f"{field}.reference_milestone_node_index", f"{reference} is out of range [-1, {n_nodes - 1}]")
    if similarity in ("addition", "removal", "update", "guardrail", "tool_trace_dependant") and reference is None:
        raise f.fail(f"{field}.reference_milestone_node_index", f"a {similarity!r} constraint needs a reference")
    columns = f.strings(obj, "target_columns", f"{field}.target_columns")
    assert columns is not None
    dtypes = f.get(obj, "target_dtypes", f"{field}.target_dtypes", dict)
    rows = f.get(obj, "target_rows", f"{field}.target_rows", list)
    if similarity != "guardrail" and not rows:
        raise f.fail(f"{field}.target_rows", "empty: a constraint needs at least one target row")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise f.fail(f"{field}.target_rows[{i}]", "expected an object")
        if set(row) != set(columns):
            raise f.fail(
                f"{field}.target_rows[{i}]", f"columns {sorted(row)} differ from target_columns {sorted(columns)}"
            )
    col_sims_raw = f.get(obj, "column_similarity", f"{field}.column_similarity", dict)
    missing = set(columns) - set(col_sims_raw)
    if missing:
        raise f.fail(f"{field}.column_similarity", f"no similarity for target columns {sorted(missing)}")
    col_sims = {
        col: _parse_column_similarity(f, spec, f"{field}.column_similarity.{col}") for col, spec in col_sims_raw.items()
    }
    fill_to = extractor = None
    if similarity == "tool_trace_dependant":
        if database != "SANDBOX":
            raise f.fail(f"{field}.database", "a tool_trace_dependant constraint must be on SANDBOX")
        ttd = f.get(obj, "tool_trace_dependant", f"{field}.tool_trace_dependant", dict)
        fill_to = f.get(ttd, "fill_to", f"{field}.tool_trace_dependant.fill_to", str)
        if fill_to not in _FILL_TO:
            raise f.fail(
                f"{field}.tool_trace_dependant.fill_to", f"expected 'content' or 'tool_trace', got {fill_to!r}"
            )
        if fill_to not in columns:
            raise f.fail(f"{field}.tool_trace_dependant.fill_to", f"{fill_to!r} is not a target column")
        extractor = _parse_extractor(
            f,
            f.get(ttd, "extractor", f"{field}.tool_trace_dependant.extractor", dict),
            f"{field}.tool_trace_dependant.extractor",
        )
    return Constraint(
        database=database,
        similarity=similarity,
        reference=reference,
        target_columns=columns,
        target_dtypes=freeze(dtypes),
        target_rows=tuple(freeze(r) for r in rows),
        column_similarity=FrozenDict(col_sims),
        fill_to=fill_to,
        extractor=extractor,
    )


def _parse_milestones(f: Fields, obj: Mapping[str, Any], key: str) -> tuple[Milestone, ...]:
    raw = f.get(obj, key, key, list)
    out = []
    for i, m in enumerate(raw):
        field = f"{key}[{i}]"
        index = f.get(m, "index", f"{field}.index", int)
        if index != i:
            raise f.fail(f"{field}.index", f"is {index}, expected its position {i}")
        cons_raw = f.get(m, "constraints", f"{field}.constraints", list)
        if not cons_raw:
            raise f.fail(f"{field}.constraints", "empty: a milestone needs at least one constraint")
        constraints = tuple(
            _parse_constraint(f, c, f"{field}.constraints[{j}]", len(raw)) for j, c in enumerate(cons_raw)
        )
        if all(c.similarity == "guardrail" for c in constraints):
            raise f.fail(f"{field}.constraints", "only guardrails: a milestone needs a non-guardrail constraint")
        gl = f.strings(m, "guardrail_database_list", f"{field}.guardrail_database_list", optional=True)
        gx = f.strings(
            m, "guardrail_database_exclusion_list", f"{field}.guardrail_database_exclusion_list", optional=True
        )
        for name, dbs in (("guardrail_database_list", gl), ("guardrail_database_exclusion_list", gx)):
            for d in dbs or ():
                if d not in DATABASES:
                    raise f.fail(f"{field}.{name}", f"unknown database {d!r}")
        guardrails = []
        for j, g in enumerate(f.get(m, "guardrails", f"{field}.guardrails", list, optional=True) or []):
            gfield = f"{field}.guardrails[{j}]"
            db = f.get(g, "database", f"{gfield}.database", str)
            if db not in DATABASES:
                raise f.fail(f"{gfield}.database", f"unknown database {db!r}")
            ref = f.get(g, "reference_milestone_node_index", f"{gfield}.reference_milestone_node_index", int)
            if not -1 <= ref < len(raw):
                raise f.fail(f"{gfield}.reference_milestone_node_index", f"{ref} is out of range")
            guardrails.append(Guardrail(database=db, reference=ref))
        out.append(
            Milestone(
                index=i,
                constraints=constraints,
                guardrail_database_list=gl if gl is not None else DATABASES,
                guardrail_database_exclusion_list=gx,
                guardrails=tuple(guardrails),
            )
        )
    return tuple(out)


def _parse_edges(
    f: Fields, obj: Mapping[str, Any], key: str, n: int, optional: bool
) -> tuple[tuple[int, int], ...] | None:
    raw = f.get(obj, key, key, list, optional=optional)
    if raw is None:
        return None
    edges = []
    for i, e in enumerate(raw):
        if not (isinstance(e, list) and len(e) == 2 and all(json_isinstance(x, int) for x in e)):
            raise f.fail(f"{key}[{i}]", f"expected a pair of node indices, got {e!r}")
        a, b = e
        if not (0 <= a < n and 0 <= b < n) or a == b:
            raise f.fail(f"{key}[{i}]", f"edge {e!r} is not between two distinct nodes of 0..{n - 1}")
        edges.append((a, b))
    return tuple(edges)


def _ancestors(n: int, edges: tuple[tuple[int, int], ...]) -> list[set[int]]:
    preds: list[set[int]] = [set() for _ in range(n)]
    for a, b in edges:
        preds[b].add(a)
    out: list[set[int]] = []
    for i in range(n):
        seen: set[int] = set()
        stack = list(preds[i])
        while stack:
            x = stack.pop()
            if x not in seen:
                seen.add(x)
                stack.extend(preds[x])
        out.append(seen)
    return out


def _check_dag(f: Fields, key: str, nodes: tuple[Milestone, ...], edges: tuple[tuple[int, int], ...]) -> None:
    ancestors = _ancestors(len(nodes), edges)
    for i, anc in enumerate(ancestors):
        if i in anc:
            raise f.fail(key, f"the graph has a cycle through node {i}")
    if len(nodes) > 1:
        linked = {x for e in edges for x in e}
        lonely = sorted(set(range(len(nodes))) - linked)
        if lonely:
            raise f.fail(key, f"nodes {lonely} are on no edge (upstream would never match them)")
    for m in nodes:
        for j, c in enumerate(m.constraints):
            if c.reference is not None and c.reference != -1 and c.reference not in ancestors[m.index]:
                raise f.fail(
                    f"{key.replace('_edges', 's')}[{m.index}].constraints[{j}].reference_milestone_node_index",
                    f"{c.reference} is not an ancestor of node {m.index} in the DAG",
                )


def automatic_guardrails(nodes: Sequence[Milestone], edges: Sequence[tuple[int, int]]) -> list[list[Guardrail]]:
    """Upstream's automatic guardrails for every node (EVALUATION.md §4), in node order.

    Reference ``-1`` is looked up as Python ``nodes[-1]`` (the last node), as upstream does.
    """
    preds: dict[int, set[int]] = {i: set() for i in range(len(nodes))}
    for a, b in edges:
        preds[b].add(a)
    out: list[list[Guardrail]] = []
    for i, node in enumerate(nodes):
        refs = {c.reference for c in node.constraints if c.reference is not None and c.similarity != "guardrail"}
        related = refs | preds[i]
        dbs = [d for d in node.guardrail_database_list if d not in (node.guardrail_database_exclusion_list or ())]
        blocked = {"SANDBOX"}
        for j in {i} | related:
            blocked.update(c.database for c in nodes[j].constraints if c.similarity != "guardrail")
        keep = [d for d in DATABASES if d in dbs and d not in blocked]
        out.append([Guardrail(database=d, reference=j) for j in sorted(related) for d in keep])
    return out


def _fill_guardrails(
    nodes: tuple[Milestone, ...], edges: tuple[tuple[int, int], ...], given: list[bool]
) -> tuple[Milestone, ...]:
    """Nodes whose file entry had no ``guardrails`` field get the automatic ones."""
    if all(given):
        return nodes
    rule = automatic_guardrails(nodes, edges)
    return tuple(n if g else replace(n, guardrails=tuple(rule[n.index])) for n, g in zip(nodes, given, strict=True))


def parse_scenario(obj: Any, where: str = "scenario") -> Scenario:
    """Build a :class:`Scenario` from one decoded JSONL object; ``where`` prefixes error messages."""
    f = Fields(where)
    if not isinstance(obj, Mapping):
        raise ScenarioError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    name = f.get(obj, "name", "name", str)
    f = Fields(f"{where}: scenario {name!r}")
    milestones = _parse_milestones(f, obj, "milestones")
    minefields = _parse_milestones(f, obj, "minefields")
    m_edges = _parse_edges(f, obj, "milestone_edges", len(milestones), optional=False)
    f_edges = _parse_edges(f, obj, "minefield_edges", len(minefields), optional=False)
    assert m_edges is not None and f_edges is not None
    _check_dag(f, "milestone_edges", milestones, m_edges)
    _check_dag(f, "minefield_edges", minefields, f_edges)
    milestones = _fill_guardrails(
        milestones, m_edges, [isinstance(m, dict) and "guardrails" in m for m in obj["milestones"]]
    )
    minefields = _fill_guardrails(
        minefields, f_edges, [isinstance(m, dict) and "guardrails" in m for m in obj["minefields"]]
    )
    sandbox_raw = f.get(obj, "sandbox", "sandbox", list)
    for i, row in enumerate(sandbox_raw):
        if not isinstance(row, dict) or row.get("sandbox_message_index") != i:
            raise f.fail(f"sandbox[{i}].sandbox_message_index", f"expected {i}")
    first_user = f.get(obj, "first_user_sandbox_message_index", "first_user_sandbox_message_index", int)
    if not 0 <= first_user < len(sandbox_raw):
        raise f.fail("first_user_sandbox_message_index", f"{first_user} is not a sandbox row")
    world_raw = f.get(obj, "world", "world", dict)
    for db, rows in world_raw.items():
        if db not in WORLD_DATABASES:
            raise f.fail(f"world.{db}", "unknown world database")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise f.fail(f"world.{db}", "expected a list of row objects")
    tdv = []
    for i, t in enumerate(f.get(obj, "time_dependent_values", "time_dependent_values", list, optional=True) or []):
        tdv.append(
            TimeDependentValue(
                path=f.get(t, "path", f"time_dependent_values[{i}].path", str),
                value=freeze(t.get("value") if isinstance(t, dict) else None),
                expr=freeze(f.get(t, "expr", f"time_dependent_values[{i}].expr", dict)),
            )
        )
    max_messages = f.get(obj, "max_messages", "max_messages", int)
    if max_messages <= 0:
        raise f.fail("max_messages", f"must be positive, got {max_messages}")
    oracle = f.get(obj, "oracle_similarity", "oracle_similarity", (int, float), optional=True)
    return Scenario(
        name=name,
        source=f.get(obj, "source", "source", str),
        categories=f.strings(obj, "categories", "categories") or (),
        base_world=f.get(obj, "base_world", "base_world", str),
        max_messages=max_messages,
        tool_allow_list=f.strings(obj, "tool_allow_list", "tool_allow_list", optional=True),
        tool_deny_list=f.strings(obj, "tool_deny_list", "tool_deny_list", optional=True),
        agent_tools=f.strings(obj, "agent_tools", "agent_tools") or (),
        user_tools=f.strings(obj, "user_tools", "user_tools", optional=True) or (),
        agent_system_prompt=f.get(obj, "agent_system_prompt", "agent_system_prompt", str),
        user_simulator_system_prompt=f.get(obj, "user_simulator_system_prompt", "user_simulator_system_prompt", str),
        user_simulator_task=f.get(obj, "user_simulator_task", "user_simulator_task", str),
        first_user_messages=f.strings(obj, "first_user_messages", "first_user_messages") or (),
        user_simulator_few_shot=freeze(f.get(obj, "user_simulator_few_shot", "user_simulator_few_shot", list)),
        sandbox=freeze(sandbox_raw),
        first_user_sandbox_message_index=first_user,
        world=freeze(world_raw),
        milestones=milestones,
        minefields=minefields,
        milestone_edges=m_edges,
        minefield_edges=f_edges,
        milestone_edges_declared=_parse_edges(f, obj, "milestone_edges_declared", len(milestones), optional=True),
        minefield_edges_declared=_parse_edges(f, obj, "minefield_edges_declared", len(minefields), optional=True),
        augmentations=freeze(f.get(obj, "augmentations", "augmentations", dict, optional=True) or {}),
        time_dependent_values=tuple(tdv),
        oracle_similarity=float(oracle) if oracle is not None else None,
    )


def _scenarios_path(path: str | Path | None) -> Path:
    if path is not None:
        return Path(path)
    return toolsandbox_data_dir() / "scenarios" / "base_scenarios.jsonl"


@lru_cache(maxsize=8)
def _load_scenarios_cached(path: Path) -> FrozenDict:
    if not path.is_file():
        raise ScenarioError(f"{path}: no such file (the ToolSandbox scenarios; see TOOLSANDBOX_DATA_DIR)")
    scenarios: dict[str, Scenario] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path.name}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ScenarioError(f"{where}: invalid JSON: {exc}") from None
            scenario = parse_scenario(obj, where)
            if scenario.name in scenarios:
                raise ScenarioError(f"{where}: scenario {scenario.name!r}: name: duplicate scenario name")
            scenarios[scenario.name] = scenario
    return FrozenDict(scenarios)


def load_scenarios(path: str | Path | None = None) -> Mapping[str, Scenario]:
    """All scenarios of ``base_scenarios.jsonl`` by name, in file order (read once, then cached).

    ``path`` defaults to ``<toolsandbox data dir>/scenarios/base_scenarios.jsonl``; a missing data
    folder raises :class:`trace_gym.data.DataDirError`.
    """
    return _load_scenarios_cached(_scenarios_path(path).resolve())


def load_scenario(name: str, path: str | Path | None = None) -> Scenario:
    """One scenario by name, with an error listing close names when it does not exist."""
    scenarios = load_scenarios(path)
    if name not in scenarios:
        close = [s for s in scenarios if name in s or s in name][:5]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown ToolSandbox scenario {name!r} ({len(scenarios)} known){hint}")
    return scenarios[name]
