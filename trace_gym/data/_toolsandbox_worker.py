"""Run *inside* the private ToolSandbox venv by :mod:`trace_gym.data.toolsandbox_export`; standard library only.

Usage: ``python _export_worker.py SRC CLOCK OUT`` with ``SRC`` an upstream checkout (the folder holding
``tool_sandbox/``), ``CLOCK`` a naive local ISO time (``2025-06-04T09:00:00``; the caller sets ``TZ``) and
``OUT`` the JSON file to write: ``{"clock", "user_instruction", "scenarios": [...]}``.

The clock is frozen before upstream is imported (``datetime.datetime.now()``, ``time.time()``), generated
ids are deterministic (the k-th ``uuid4()`` is ``uuid5(NAMESPACE_URL, "toolsandbox-conformance/{k}")``) and
every upstream callable is described by name; the exporter maps the names to data.  Upstream's own scenario
builders run unmodified: the only hooks record what they would otherwise forget (which base scenario an
extension extends, which constraints were declared before guardrails were appended, declared edge lists).
"""

from __future__ import annotations

import datetime
import functools
import itertools
import json
import sys
import time
import uuid

MODULES = ("single_tool_call_scenarios", "multiple_tool_call_scenarios", "multiple_user_turn_scenarios",
           "insufficient_information_scenarios")
WORLD = ("SETTING", "CONTACT", "MESSAGING", "REMINDER")


def freeze(clock: str) -> None:
    now = datetime.datetime.fromisoformat(clock)
    stamp = now.timestamp()
    real = datetime.datetime

    class FrozenDatetime(real):
        @classmethod
        def now(cls, tz=None):  # noqa: ANN001
            return now if tz is None else now.astimezone(tz)

        @classmethod
        def today(cls):
            return now

        @classmethod
        def utcnow(cls):
            return real.utcfromtimestamp(stamp)

    FrozenDatetime.__name__ = FrozenDatetime.__qualname__ = "datetime"
    datetime.datetime = FrozenDatetime  # type: ignore[misc]
    time.time = lambda: stamp
    counter = itertools.count()
    uuid.uuid4 = lambda: uuid.uuid5(uuid.NAMESPACE_URL, f"toolsandbox-conformance/{next(counter)}")


def plain(value):  # noqa: ANN001, ANN201
    """Upstream values (enums, tuples, polars rows) as JSON data."""
    if isinstance(value, dict):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)  # StrEnum members become their value
    return value


def describe_callable(fn):  # noqa: ANN001, ANN201
    """``{"name", "keywords"}`` for a function or a ``functools.partial`` of one."""
    keywords = {}
    while isinstance(fn, functools.partial):
        keywords = {**fn.keywords, **keywords}
        fn = fn.func
    name = getattr(fn, "__name__", None)
    if name is None or name == "<lambda>":
        raise SystemExit(f"cannot describe upstream callable {fn!r}: not a named function")
    out = {"name": name, "module": getattr(fn, "__module__", None)}
    if keywords:
        out["keywords"] = {k: describe_callable(v) if callable(v) else plain(v) for k, v in keywords.items()}
    return out


def install_hooks(ev, sc):  # noqa: ANN001
    """Record declared constraints/edges and the base of every extension; returns the records."""
    seen = {"declared": {}, "edges": {}, "base": {}, "keep": []}
    add_guardrails = ev.MilestoneMatcher._add_guardrail_constraints
    post_init = ev.MilestoneMatcher.__attrs_post_init__

    def recording_add(self):  # noqa: ANN001
        for m in self.milestones:
            seen["keep"].append(m)
            seen["declared"].setdefault(id(m), len(m.snapshot_constraints))
        return add_guardrails(self)

    def recording_post_init(self):  # noqa: ANN001
        seen["edges"][id(self)] = None if self.edge_list is None else [list(e) for e in self.edge_list]
        seen["keep"].append(self)
        return post_init(self)

    extend = sc.ScenarioExtension.get_extended_scenario

    def recording_extend(self):  # noqa: ANN001
        out = extend(self)
        for scenario in out.values():
            seen["base"][id(scenario)] = id(self.base_scenario)
            seen["keep"].append(scenario)
        return out

    ev.MilestoneMatcher._add_guardrail_constraints = recording_add
    ev.MilestoneMatcher.__attrs_post_init__ = recording_post_init
    sc.ScenarioExtension.get_extended_scenario = recording_extend
    return seen


def constraint_doc(c, ev):  # noqa: ANN001, ANN201
    df = c.target_dataframe
    columns = list(df.columns) if df is not None else []
    rows = plain(df.to_dicts()) if df is not None else []
    measures = c.column_similarity_measure or {}
    return {
        "database": str(c.database_namespace),
        "similarity": describe_callable(c.snapshot_constraint),
        "reference_milestone_node_index": c.reference_milestone_node_index,
        "target_columns": columns,
        "target_dtypes": {k: str(df.schema[k]) for k in columns},
        "target_rows": rows,
        "column_similarity": {k: describe_callable(measures[k]) for k in columns if k in measures},
    }


def matcher_doc(matcher, seen, ev):  # noqa: ANN001, ANN201
    nodes = []
    for i, m in enumerate(matcher.milestones):
        n = seen["declared"].get(id(m), len(m.snapshot_constraints))
        nodes.append({
            "index": i,
            "constraints": [constraint_doc(c, ev) for c in m.snapshot_constraints[:n]],
            "guardrail_database_list": plain(m.guardrail_database_list),
            "guardrail_database_exclusion_list": plain(m.guardrail_database_exclusion_list),
            "guardrails": [{"database": str(c.database_namespace),
                            "reference_milestone_node_index": c.reference_milestone_node_index}
                           for c in m.snapshot_constraints[n:]],
        })
    return nodes, [list(e) for e in matcher.edge_list], seen["edges"].get(id(matcher))


def scenario_doc(name, source, scenario, base_name, seen, ns, ev, tools_mod, ranker, backend):  # noqa: ANN001, ANN201
    ctx = scenario.starting_context
    sandbox = plain(ctx.get_database(ns.SANDBOX, drop_sandbox_message_index=False,
                                     get_all_history_snapshots=True).to_dicts())
    available = ctx.get_available_tools(scrambling_allowed=True)
    milestones, edges, declared = matcher_doc(scenario.evaluation.milestone_matcher, seen, ev)
    minefields, mine_edges, mine_declared = matcher_doc(scenario.evaluation.minefield_matcher, seen, ev)
    ranking = ranker(list(ctx.tool_allow_list or []), tools_mod, preferred_tool_backend=backend)
    return {
        "name": name, "source": source, "categories": plain(scenario.categories), "base_world": base_name,
        "max_messages": scenario.max_messages,
        "tool_allow_list": plain(ctx.tool_allow_list), "tool_deny_list": plain(ctx.tool_deny_list),
        "agent_tools": [k for k, t in available.items() if "AGENT" in plain(getattr(t, "visible_to", ()))],
        "user_tools": [k for k, t in available.items() if "USER" in plain(getattr(t, "visible_to", ()))],
        "sandbox": sandbox,
        "first_user_sandbox_message_index": ctx.first_user_sandbox_message_index,
        "world": {db: plain(ctx.get_database(getattr(ns, db)).to_dicts()) for db in WORLD},
        "milestones": milestones, "milestone_edges": edges, "milestone_edges_declared": declared,
        "minefields": minefields, "minefield_edges": mine_edges, "minefield_edges_declared": mine_declared,
        "distraction_tool_ranking": ranking,
    }


def main(argv: list[str]) -> int:
    src, clock, out_path = argv
    freeze(clock)
    sys.path.insert(0, src)
    import importlib

    import tool_sandbox.tools as tools_mod
    from tool_sandbox.common import evaluation as ev
    from tool_sandbox.common import scenario as sc
    from tool_sandbox.common import tool_discovery as discovery
    from tool_sandbox.common.execution_context import DatabaseNamespace as ns
    from tool_sandbox.scenarios import base_scenarios

    seen = install_hooks(ev, sc)
    backend = discovery.ToolBackend.DEFAULT
    base_names: dict[int, str] = {}
    build_bases = base_scenarios.named_base_scenarios
    records = []
    for source in MODULES:
        mod = importlib.import_module(f"tool_sandbox.scenarios.{source}")

        def recording_bases(preferred_tool_backend, _build=build_bases):  # noqa: ANN001, ANN202
            bases = _build(preferred_tool_backend=preferred_tool_backend)
            seen["keep"].append(bases)
            base_names.update({id(s): n for n, s in bases.items()})
            return bases

        mod.named_base_scenarios = recording_bases
        builder = getattr(mod, "named_" + source)
        for name, scenario in builder(preferred_tool_backend=backend).items():
            base = base_names.get(seen["base"].get(id(scenario)), None)
            records.append(scenario_doc(name, source, scenario, base, seen, ns, ev, tools_mod,
                                        discovery.rank_tools_by_similarity, backend))
        print(f"built {source}", file=sys.stderr, flush=True)
    from tool_sandbox.scenarios.user_simulator_few_shot_examples import USER_INSTRUCTION

    doc = {"clock": clock, "user_instruction": USER_INSTRUCTION, "scenarios": records}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
