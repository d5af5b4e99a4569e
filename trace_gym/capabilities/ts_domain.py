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
    """One episode's ToolSandbox world, built from the synthetic database; calls run through a ToolBox.

    The starting world is built once and never written: the episode's world and every
    :meth:`fork` share it copy-on-write (:meth:`World.copy`), and each call runs after a
    :meth:`World.savepoint`, so a failed call is undone without copying anything up front.
    """

    def __init__(self, db: dict[str, Any], *, box: Any = None, _start: World | None = None):
        if _start is None:
            tables = {"SETTING": list(db["settings"].values())}
            tables.update({WORLD_TABLES[t]: db[t] for t in ("contacts", "messages", "reminders")})
            _start = World.from_tables(tables, now=float(db["clock"]["now"]["timestamp"]), new_id=counter_ids(_ID_PREFIX))
        self._db = db
        self._start = _start  # the starting world: never written (the episode's world and forks share it)
        self._box = box if box is not None else _agent_box(_catalog())  # every agent tool; its world is not used
        self.world = _start.copy()
        self.world.new_id = counter_ids(_ID_PREFIX)  # every episode (and fork) numbers its new ids from 0
        self.box = self._box.on(self.world)
        self._initial: dict[str, Any] | None = None

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        """Run one call; a failure is an error result (ToolSandbox's line) and changes nothing."""
        world = self.world
        mark = world.savepoint()
        out = self.box.call(name, args)
        if out.error is not None:
            world.rollback(mark)  # a tool that failed half-way leaves nothing behind
            return ToolResult(out.error, True)
        return ToolResult(out.content, False)

    def initial_db(self) -> dict[str, Any]:
        """The starting state (the starting world's rows, which nothing writes: do not mutate)."""
        if self._initial is None:
            self._initial = _tables(self._start, copy=False)
        return self._initial

    def current_db(self) -> dict[str, Any]:
        return _tables(self.world, copy=True)

    def state_view(self) -> dict[str, Any]:
        """The state now without a copy (shares the world's rows: read it, never change it)."""
        return _tables(self.world, copy=False)

    def fingerprint(self) -> str:
        payload = json.dumps(self.state_view(), sort_keys=True, default=repr)
        return hashlib.sha256(payload.encode()).hexdigest()

    def fork(self) -> WorldBackend:
        fork = WorldBackend(self._db, box=self._box, _start=self._start)
        fork._initial = self.initial_db()  # the same starting state, shared
        return fork


def _agent_box(catalog: Any) -> Any:
    """A ToolBox of every agent tool of ``catalog`` (rebind it to a world with ``on``)."""
    from ..toolsandbox.toolbox import ToolBox

    return ToolBox(World(), catalog=catalog)


def _tables(world: World, *, copy: bool) -> dict[str, Any]:
    rows = world.rows if copy else world.latest_rows
    return {"settings": {"device": rows("SETTING")[0]}, "contacts": rows("CONTACT"),
            "messages": rows("MESSAGING"), "reminders": rows("REMINDER")}


class ToolSandboxTools:
    """The exposed tools with ToolSandbox's schemas; calls go to the episode's :class:`WorldBackend`."""

    def __init__(self, names: list[str]):
        from ..toolsandbox.toolbox import core_tool

        catalog = _catalog()
        specs = catalog.specs
        unknown = [n for n in names if n not in specs]
        if unknown:
            raise ValueError(f"ToolSandbox has no tool(s) {unknown}; available: {sorted(specs)}")
        self.catalog = catalog
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

    def __init__(self) -> None:
        self._box: Any = None  # every agent tool of the catalogue the latest tools() loaded (a ToolBox)

    def tool_names(self) -> frozenset[str]:
        return frozenset(n for n, s in _catalog().specs.items() if "AGENT" in s.visible_to)

    def write_tools(self) -> frozenset[str]:
        return frozenset(n for n, s in _catalog().specs.items() if set(s.writes) & set(COLUMNS))

    def tables(self) -> tuple[str, ...]:
        return tuple(WORLD_TABLES) + tuple(MATERIAL_FIELDS)

    def clonable(self) -> tuple[str, ...]:
        return ()

    def tools(self, names: list[str]) -> ToolSandboxTools:
        tools = ToolSandboxTools(names)
        if self._box is None or self._box.catalog is not tools.catalog:
            self._box = _agent_box(tools.catalog)
        return tools

    def generate(self, rng: random.Random, **sizes: int) -> dict[str, Any]:
        return generate_toolsandbox_world(rng, **sizes)

    def backend(self, db: dict[str, Any]) -> WorldBackend:
        return WorldBackend(db, box=self._box)

    def system_prompt(self) -> str:
        return agent_system_prompt()

    def user_tool_names(self) -> frozenset[str]:
        """None: ToolSandbox's user has no tools of their own."""
        return frozenset()

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
        from .scenario import UnsolvableScenarioError, bind_scenario
        from .spec_doc import CapabilitySpec, resolve_number

        spec = CapabilitySpec(doc, source, list(doc["tools"]))
        knobs = spec.knobs()
        sizes = {k: int(resolve_number(v, knobs)) for k, v in (doc.get("db") or {}).items()}
        for i, case in enumerate(doc["cases"]):
            problem: UnsolvableScenarioError | None = None
            for seed in range(BIND_CHECK_SEEDS):
                rng = random.Random(seed)
                try:
                    bind_scenario(spec, case, generate_toolsandbox_world(rng, **sizes), knobs, rng, seed)
                    problem = None
                    break
                except UnsolvableScenarioError as exc:
                    problem = exc
            if problem is not None:
                where = f"cases[{i}].slots.{problem.slot}" if problem.slot else f"cases[{i}]"
                raise SpecError(source, where, f"a slot that can be filled on the synthetic world "
                                               f"(none of seeds 0-{BIND_CHECK_SEEDS - 1} binds): {problem}")
