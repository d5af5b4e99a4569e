"""The ``toolsandbox`` capability domain: ToolSandbox's tools over a seeded synthetic world.

* **Tools** are ToolSandbox's own (:class:`trace_gym.toolsandbox.toolbox.ToolBox` over a
  :class:`~trace_gym.toolsandbox.world.World`): the same schemas, argument binding,
  preconditions (cellular, wifi, location service, low-battery mode), results and error
  lines as ``trace/toolsandbox-v0``.  A failed call leaves the world unchanged.
* **The system prompt** is the one ToolSandbox gives its agent (read from the scenario data,
  where every base scenario shares it), so a policy sees the framing of the target.
* **The database** is :func:`trace_gym.capabilities.synthdb.toolsandbox.generate_toolsandbox_world`;
  rewards and ``state_fingerprint`` look at the world (``settings``, ``contacts``,
  ``messages``, ``reminders``), never at the scenario material.
* **Load-time checks** (:meth:`ToolSandboxDomain.check_spec`): every ``db`` size and the
  knob that sets it stay within the generator's range, every slot ``where`` names a field
  of its table (and a value the world can hold), and every case binds on the synthetic
  worlds of a few seeds at the default knobs — else :class:`SpecError` names the field.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from functools import lru_cache
from typing import Any

from ..core.tools import ToolResult, ToolSet
from ..toolsandbox.world import COLUMNS, World, counter_ids
from .specfile import SpecError
from .synthdb.toolsandbox import KINDS, MATERIAL_FIELDS, SIZES, WORLD_TABLES, generate_toolsandbox_world

__all__ = ["ToolSandboxDomain", "WorldBackend", "ToolSandboxTools", "agent_system_prompt", "BIND_CHECK_SEEDS"]

BIND_CHECK_SEEDS = 8  # every case must bind on the worlds of seeds 0..7 at the default knobs
_ID_PREFIX = "trace-gym/capability/"


@lru_cache(maxsize=1)
def agent_system_prompt() -> str:
    """ToolSandbox's agent system prompt (the one every base scenario shares; the first one otherwise)."""
    from ..toolsandbox.scenarios import load_scenarios

    prompts = [s.agent_system_prompt for s in load_scenarios().values()]
    return max(set(prompts), key=prompts.count) if prompts else ""


def _catalog() -> Any:
    from ..toolsandbox.catalog import load_catalog

    return load_catalog()


class WorldBackend:
    """One episode's ToolSandbox world, built from the synthetic database; calls run through a ToolBox."""

    def __init__(self, db: dict[str, Any], names: list[str] | None = None, *, _initial: dict[str, Any] | None = None):
        from ..toolsandbox.toolbox import ToolBox

        self._db, self._names = db, (list(names) if names is not None else None)
        tables = {"SETTING": list(db["settings"].values())}
        tables.update({WORLD_TABLES[t]: db[t] for t in ("contacts", "messages", "reminders")})
        self.world = World.from_tables(tables, now=float(db["clock"]["now"]["timestamp"]), new_id=counter_ids(_ID_PREFIX))
        self.box = ToolBox(self.world, self._names, catalog=_catalog())
        self._initial = _initial if _initial is not None else self.current_db()  # shared by forks, never mutated

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        """Run one call; a failure is an error result (ToolSandbox's line) and changes nothing."""
        before = self.world.snapshots()
        out = self.box.call(name, args)
        if out.error is not None:
            if self.world.snapshots() != before:  # a tool that failed half-way: put the world back
                self.world = self.box.world = World(
                    {db: [(s["sandbox_message_index"], s["rows"]) for s in snaps] for db, snaps in before.items()},
                    now=self.world.now, new_id=self.world.new_id)
            return ToolResult(out.error, True)
        return ToolResult(out.content, False)

    def initial_db(self) -> dict[str, Any]:
        return self._initial

    def current_db(self) -> dict[str, Any]:
        w = self.world
        return {"settings": {"device": w.rows("SETTING")[0]}, "contacts": w.rows("CONTACT"),
                "messages": w.rows("MESSAGING"), "reminders": w.rows("REMINDER")}

    def fingerprint(self) -> str:
        payload = json.dumps(self.current_db(), sort_keys=True, default=repr)
        return hashlib.sha256(payload.encode()).hexdigest()

    def fork(self) -> WorldBackend:
        return WorldBackend(self._db, self._names, _initial=self._initial)


class ToolSandboxTools:
    """The exposed tools with ToolSandbox's schemas; calls go to the episode's :class:`WorldBackend`."""

    def __init__(self, names: list[str]):
        from ..toolsandbox.toolbox import core_tool

        specs = _catalog().specs
        unknown = [n for n in names if n not in specs]
        if unknown:
            raise ValueError(f"ToolSandbox has no tool(s) {unknown}; available: {sorted(specs)}")
        self.backend: WorldBackend | None = None
        self.kinds: dict[str, str] = {}
        tools = []
        for name in names:
            tool = core_tool(specs[name], self._dispatcher(name))
            self.kinds[name] = tool.kind
            tools.append(tool)
        self.toolset = ToolSet(tools)

    def validate(self, name: str, args: dict[str, Any]) -> str | None:
        """``None`` for an exposed tool (ToolSandbox checks the arguments itself when called)."""
        return None if name in self.toolset else f"unknown tool {name!r}"

    def _dispatcher(self, name: str) -> Any:
        def call(arguments: dict[str, Any]) -> str:
            from ..core.tools import ToolError

            if self.backend is None:
                raise ToolError("no episode is running: call reset() first")
            res = self.backend.call(name, arguments)
            if res.error:
                raise ToolError(res.content)
            return res.content

        return call


class ToolSandboxDomain:
    """The ``toolsandbox`` domain (see the module docstring)."""

    name = "toolsandbox"

    def tool_names(self) -> frozenset[str]:
        return frozenset(n for n, s in _catalog().specs.items() if "AGENT" in s.visible_to)

    def write_tools(self) -> frozenset[str]:
        return frozenset(n for n, s in _catalog().specs.items() if set(s.writes) & set(COLUMNS))

    def tables(self) -> tuple[str, ...]:
        return tuple(WORLD_TABLES) + tuple(MATERIAL_FIELDS)

    def clonable(self) -> tuple[str, ...]:
        return ()

    def tools(self, names: list[str]) -> ToolSandboxTools:
        return ToolSandboxTools(names)

    def generate(self, rng: random.Random, **sizes: int) -> dict[str, Any]:
        return generate_toolsandbox_world(rng, **sizes)

    def backend(self, db: dict[str, Any]) -> WorldBackend:
        return WorldBackend(db)

    def system_prompt(self) -> str:
        return agent_system_prompt()

    # ------------------------------------------------------------------ load-time checks
    def check_spec(self, doc: dict[str, Any], source: str) -> None:
        knobs = doc.get("difficulty", {})
        for key, value in (doc.get("db") or {}).items():
            if key not in SIZES:
                raise SpecError(source, f"db.{key}", f"a size of the toolsandbox world {sorted(SIZES)}, got {key!r}")
            lo, hi = SIZES[key]
            if isinstance(value, dict):
                k = knobs[value["knob"]]
                scale = float(value.get("scale", 1.0))
                ends = sorted(((1.0 - k[e]) if value.get("complement") else k[e]) * scale for e in ("min", "max"))
                if ends[0] < lo or ends[1] > hi:
                    raise SpecError(source, f"difficulty.{value['knob']}",
                                    f"a knob whose range keeps db.{key} within [{lo}, {hi}], got [{ends[0]:g}, {ends[1]:g}]")
            elif not lo <= value <= hi:
                raise SpecError(source, f"db.{key}", f"a size within [{lo}, {hi}], got {value}")
        for i, case in enumerate(doc["cases"]):
            for sname, slot in case["slots"].items():
                self._check_where(slot, f"cases[{i}].slots.{sname}", source)
        self._check_binding(doc, source)

    @staticmethod
    def _check_where(slot: dict[str, Any], where: str, source: str) -> None:
        table = slot["from"]
        fields = COLUMNS[WORLD_TABLES[table]] if table in WORLD_TABLES else MATERIAL_FIELDS.get(table)
        if fields is None:  # drawn from an earlier slot: its shape is the record's
            return
        for path, matcher in (slot.get("where") or {}).items():
            field = path.split(".")[0]
            if path == ".":  # the record itself
                continue
            if field not in fields:
                raise SpecError(source, f"{where}.where.{path}",
                                f"a field of the toolsandbox {table!r} table {list(fields)}, got {field!r}")
            allowed = KINDS.get((table, field))
            if allowed is not None and not isinstance(matcher, (dict, list)) and "{" not in str(matcher) \
                    and matcher not in allowed:
                raise SpecError(source, f"{where}.where.{path}",
                                f"a value the world can hold for {table}.{field} {list(allowed)}, got {matcher!r}; "
                                "the slot could never be filled")

    @staticmethod
    def _check_binding(doc: dict[str, Any], source: str) -> None:
        from .scenario import bind_scenario
        from .spec import CapabilitySpec, resolve_number

        spec = CapabilitySpec(doc, source, list(doc["tools"]))
        knobs = spec.knobs()
        sizes = {k: int(resolve_number(v, knobs)) for k, v in (doc.get("db") or {}).items()}
        for i, case in enumerate(doc["cases"]):
            problem = None
            for seed in range(BIND_CHECK_SEEDS):
                rng = random.Random(seed)
                try:
                    bind_scenario(spec, case, generate_toolsandbox_world(rng, **sizes), knobs, rng, seed)
                    problem = None
                    break
                except Exception as exc:  # noqa: BLE001 - any failure to bind is reported as the spec's
                    problem = str(exc)
            if problem is not None:
                m = re.search(r"slot '(\w+)'", problem)
                where = f"cases[{i}].slots.{m.group(1)}" if m else f"cases[{i}]"
                raise SpecError(source, where, f"a slot that can be filled on the synthetic world "
                                               f"(none of seeds 0-{BIND_CHECK_SEEDS - 1} binds): {problem}")
