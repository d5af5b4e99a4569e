"""The ToolSandbox tools bound to one world: the public way to use them outside the benchmark env.

>>> world = World.from_tables({"SETTING": [settings_row], "CONTACT": contacts})   # doctest: +SKIP
>>> box = ToolBox(world, ["search_contacts", "send_message_with_phone_number"])  # doctest: +SKIP
>>> box.call("search_contacts", {"name": "Fredrik"}).content                     # doctest: +SKIP
>>> env_tools = box.toolset()   # a trace_gym.core.ToolSet with upstream's schemas  # doctest: +SKIP

Every call runs the one implementation of the tool (:mod:`trace_gym.toolsandbox.tools`)
on the injected world, with upstream's binding, type checks and error lines.  A call
that fails (unknown tool, bad arguments, a precondition) returns an error outcome and
leaves the world's current rows unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trace_gym.core import Tool, ToolError, ToolSet

from .catalog import Catalog, ToolSpec, load_catalog
from .data import thaw
from .tools import KnowledgeBase, ToolOutcome, run_tool
from .world import DATABASES, World

__all__ = ["ToolBox", "core_tool", "unknown_tool_error"]

_WORLD = frozenset(DATABASES)


def unknown_tool_error(name: str, offered: Iterable[str]) -> str:
    """The agent-visible line for a call to a tool that is not offered (upstream's ``KeyError`` text)."""
    listed = "{" + ", ".join(repr(n) for n in sorted(offered)) + "}"
    msg = (f"Agent tool call agent_facing_tool_name={name!r} is not a known allowed tool. "
           f"Options are available_tool_names={listed}")
    return f"KeyError: {KeyError(msg)}"


def core_tool(spec: ToolSpec, call: Any, *, facing: str | None = None, schema: Any = None) -> Tool:
    """A :class:`trace_gym.core.Tool` for ``spec`` whose ``fn(**arguments)`` is ``call(arguments) -> str``.

    ``facing``/``schema`` override the agent-facing name and schema (augmented views).
    Argument checking is left to ``call`` (upstream's own binding and type checks).
    """
    schema = thaw(schema if schema is not None else spec.schema)
    facing = facing or spec.name
    schema["function"]["name"] = facing
    fn = schema["function"]
    tool = Tool(
        name=facing,
        description=fn.get("description", ""),
        parameters=fn.get("parameters", {"type": "object", "properties": {}}),
        fn=lambda **arguments: call(arguments),
        kind="write" if set(spec.writes) & _WORLD else "read",
        validate=lambda args: None,
    )
    tool._schema = schema  # keep upstream's exact schema (the core would rebuild it)
    return tool


class ToolBox:
    """ToolSandbox tools over one injected :class:`~trace_gym.toolsandbox.world.World`.

    ``names`` picks the tools (default: every agent tool, in upstream's discovery order);
    ``catalog`` defaults to the data folder's ``tools.json`` and ``kb`` (the offline answers
    of the five web tools) to the catalogue's knowledge base.
    """

    def __init__(
        self, world: World, names: Iterable[str] | None = None, *, catalog: Catalog | None = None,
        kb: KnowledgeBase | None = None,
    ):
        self.world = world
        self.catalog = catalog if catalog is not None else load_catalog()
        self.kb = kb if kb is not None else self.catalog.kb
        specs = self.catalog.specs
        if names is None:
            self.specs: dict[str, ToolSpec] = {n: s for n, s in specs.items() if "AGENT" in s.visible_to}
        else:
            chosen = list(names)
            unknown = [n for n in chosen if n not in specs]
            if unknown:
                raise ValueError(f"unknown ToolSandbox tool(s) {unknown}; known: {sorted(specs)}")
            wanted = set(chosen)
            self.specs = {n: s for n, s in specs.items() if n in wanted}

    def on(self, world: World) -> ToolBox:
        """The same tools (catalogue, knowledge base) over another world."""
        box = ToolBox.__new__(ToolBox)
        box.world, box.catalog, box.kb, box.specs = world, self.catalog, self.kb, self.specs
        return box

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI function schemas of the tools, as upstream shows them."""
        return [thaw(s.schema) for s in self.specs.values()]

    def call(self, name: str, arguments: Any) -> ToolOutcome:
        """Run one tool on the world; an unknown name or bad arguments give an error outcome."""
        spec = self.specs.get(name)
        if spec is None:
            return ToolOutcome(error=unknown_tool_error(name, self.specs))
        return run_tool(spec, self.world, self.kb, arguments)

    def toolset(self) -> ToolSet:
        """The tools as a :class:`trace_gym.core.ToolSet`: results as ``repr``, errors as error results."""

        def caller(name: str) -> Any:
            def call(arguments: dict[str, Any]) -> str:
                out = self.call(name, arguments)
                if out.error is not None:
                    raise ToolError(out.error)
                return out.content

            return call

        return ToolSet(core_tool(spec, caller(name)) for name, spec in self.specs.items())
