"""Plug-in capability domains: a domain of your own, without touching the package.

A spec's ``domain:`` names a built-in domain (:data:`~trace_gym.capabilities.domains.DOMAIN_FACTORIES`)
or a plug-in.  A plug-in is a *factory*: a callable, importable as ``module:attribute``,
that takes no argument and returns an object implementing
:class:`~trace_gym.capabilities.domains.CapabilityDomain`.  Two ways to register one:

* the environment variable ``TRACE_GYM_DOMAINS`` (:data:`ENV_VAR`):
  ``name=module:factory`` items separated by commas, e.g.
  ``TRACE_GYM_DOMAINS=bookshop=bookshop_domain:make_domain`` (the module must be importable:
  on ``PYTHONPATH`` or installed);
* an entry point in the group ``trace_gym.domains`` (:data:`ENTRY_POINT_GROUP`) of an
  installed distribution, e.g. in its ``pyproject.toml``::

      [project.entry-points."trace_gym.domains"]
      bookshop = "bookshop_domain:make_domain"

Nothing is imported until a spec (or a command) asks for the domain by name; the plug-in is
then built once per process and checked (:func:`check_domain`).

Error contract: every problem is a :class:`DomainPluginError` (a ``ValueError``) with one
line naming the domain and what is wrong — a malformed ``TRACE_GYM_DOMAINS`` item, a module
that cannot be imported, a factory that is missing or raises, a result that lacks
methods of the protocol, tools whose schemas are not JSON Schemas of objects, a generator
that draws two different worlds from the same seed, and a name registered twice (a
plug-in shadowing a built-in, or two plug-ins with different factories; the same factory
registered both ways counts once), which names both sides.  Listing names
(:func:`plugin_sources`) never raises: a malformed item is kept for the error of a lookup.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .domain_protocol import CapabilityDomain, protocol_methods

__all__ = ["ENV_VAR", "ENTRY_POINT_GROUP", "DomainPluginError", "DomainSource", "plugin_sources", "source_for",
           "build_plugin", "check_domain", "domain_capabilities", "unknown_domain_note", "PROTOCOL_METHODS", "NAME_PATTERN"]

ENV_VAR = "TRACE_GYM_DOMAINS"
ENTRY_POINT_GROUP = "trace_gym.domains"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")  # the spec schema's pattern for a plug-in domain name
PROTOCOL_METHODS = protocol_methods(CapabilityDomain)  # what check_domain requires a plug-in to have
_KINDS = frozenset({"read", "write", "generic", "think"})


class DomainPluginError(ValueError):
    """A plug-in domain that cannot be used; the message (one line) names the domain and the problem."""


@dataclass(frozen=True)
class DomainSource:
    """Where a plug-in domain is registered: its ``name``, ``target`` (``module:factory``) and ``origin``."""

    name: str
    target: str
    origin: str  # "TRACE_GYM_DOMAINS" or "entry point of <distribution>"

    def describe(self) -> str:
        return f"{self.origin} ({self.name}={self.target})"


def _env_items(value: str) -> tuple[list[DomainSource], list[str]]:
    sources, problems = [], []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, eq, target = (p.strip() for p in item.partition("="))
        module, colon, attr = target.partition(":")
        if not eq or not colon or not module or not attr:
            problems.append(f"{ENV_VAR} item {item!r} is not NAME=MODULE:FACTORY")
        elif not NAME_PATTERN.match(name):
            problems.append(f"{ENV_VAR} item {item!r}: a domain name is lower-case letters, digits, '-' and '_' "
                            "(starting with a letter, at most 40 characters)")
        else:
            sources.append(DomainSource(name, target, ENV_VAR))
    return sources, problems


@lru_cache(maxsize=1)
def _entry_point_sources() -> tuple[DomainSource, ...]:
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        out.append(DomainSource(ep.name, ep.value, f"entry point of {dist}" if dist else "entry point"))
    return tuple(out)


def plugin_sources() -> tuple[list[DomainSource], list[str]]:
    """Every registered plug-in (entry points first, then ``TRACE_GYM_DOMAINS``) and the malformed items.

    Entry points are read once per process; the variable is read on every call.
    """
    env, problems = _env_items(os.environ.get(ENV_VAR, ""))
    return [*_entry_point_sources(), *env], problems


def source_for(name: str, builtins: Mapping[str, Any]) -> DomainSource | None:
    """The plug-in registered as ``name``, ``None`` when there is none (a built-in, or unknown).

    Raises :class:`DomainPluginError` naming both sides when ``name`` is a built-in that a
    plug-in also claims, or two plug-ins claim it with different factories.
    """
    sources, _ = plugin_sources()
    mine = [s for s in sources if s.name == name]
    if not mine:
        return None
    if name in builtins:
        raise DomainPluginError(f"capability domain {name!r} is registered twice: the built-in {name} domain and "
                                f"{mine[0].describe()}; give the plug-in another name")
    for other in mine[1:]:
        if other.target != mine[0].target:
            raise DomainPluginError(f"capability domain {name!r} is registered twice: {mine[0].describe()} and "
                                    f"{other.describe()}; remove one or give it another name")
    return mine[0]


def unknown_domain_note() -> str:
    """Malformed ``TRACE_GYM_DOMAINS`` items, as a note for an 'unknown domain' error ('' when none)."""
    _, problems = plugin_sources()
    return f" ({'; '.join(problems)})" if problems else ""


def _fail(src: DomainSource, problem: str) -> DomainPluginError:
    text = " ".join(str(problem).split())  # one line, whatever the plug-in's message holds
    return DomainPluginError(f"capability domain {src.name!r} from {src.describe()}: {text}")


def _raised(what: str, exc: BaseException) -> str:
    message = getattr(exc, "message", None)  # jsonschema's errors: the message without the schema dump
    return f"{what} raised {type(exc).__name__}: {message if isinstance(message, str) else exc}"


def build_plugin(src: DomainSource) -> Any:
    """Import the factory, call it and check the result (:func:`check_domain`); :class:`DomainPluginError` otherwise."""
    module, _, attr = src.target.partition(":")
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is the plug-in's, reported in one line
        raise _fail(src, f"cannot import module {module!r}: {type(exc).__name__}: {exc}") from None
    factory: Any = mod
    for part in attr.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise _fail(src, f"module {module!r} has no attribute {attr!r}")
    if not callable(factory):
        raise _fail(src, f"{src.target} is not callable (a factory takes no argument and returns the domain)")
    try:
        domain = factory()
    except Exception as exc:  # noqa: BLE001
        raise _fail(src, _raised(f"the factory {src.target}", exc)) from None
    check_domain(domain, src)
    return domain


def check_domain(domain: Any, src: DomainSource) -> None:
    """Check a plug-in domain before first use; :class:`DomainPluginError` names the first problem.

    Checked: every method of the protocol is there; ``name`` (when set) is the registered
    name; ``tool_names`` and ``write_tools`` are sets of names with the writes among the
    tools; ``tables`` are drawn by ``generate``; ``clonable`` is empty (distractor copies are
    τ²-bench's only); ``tools(every name)`` returns a :class:`~trace_gym.core.tools.ToolSet`
    whose schemas are valid JSON Schemas of objects, with a kind per tool agreeing with
    ``write_tools``; ``tools`` refuses an unknown name with ``ValueError``; ``generate``
    draws the same world twice from the same seed; the backend answers an unknown tool with
    an error result; ``system_prompt`` is text.
    """
    missing = [m for m in PROTOCOL_METHODS if not callable(getattr(domain, m, None))]
    if missing:
        raise _fail(src, f"the factory returned a {type(domain).__name__} without the CapabilityDomain method(s) "
                         f"{missing}")
    declared = getattr(domain, "name", src.name)
    if declared != src.name:
        raise _fail(src, f"the domain calls itself {declared!r}; its name must be the registered one")

    def ask(method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(domain, method)(*args, **kwargs)
        except DomainPluginError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise _fail(src, _raised(f"{method}()", exc)) from None

    names, writes = ask("tool_names"), ask("write_tools")
    for what, value in (("tool_names()", names), ("write_tools()", writes)):
        if not isinstance(value, (set, frozenset)) or not all(isinstance(n, str) for n in value):
            raise _fail(src, f"{what} must return a set of tool names, got {type(value).__name__}")
    if not names:
        raise _fail(src, "tool_names() is empty: a domain exposes at least one tool")
    if not writes <= names:
        raise _fail(src, f"write_tools() names tools that tool_names() lacks: {sorted(writes - names)}")
    users = ask("user_tool_names")
    if not isinstance(users, (set, frozenset)) or not all(isinstance(n, str) for n in users):
        raise _fail(src, f"user_tool_names() must return a set of tool names (empty: no user-side tools), "
                         f"got {type(users).__name__}")
    if ask("clonable"):
        raise _fail(src, "clonable() must be empty: distractor copies (a case's 'distractors') are offered to the "
                         "τ²-bench domains only")
    _check_tools(domain, src, sorted(names), writes, ask)
    worlds = [ask("generate", random.Random(0)) for _ in range(2)]
    if not isinstance(worlds[0], dict):
        raise _fail(src, f"generate() must return a dict (the world's tables), got {type(worlds[0]).__name__}")
    texts = [json.dumps(w, sort_keys=True, default=repr) for w in worlds]
    if texts[0] != texts[1]:
        diff = sorted(k for k in set(worlds[0]) | set(worlds[1])
                      if json.dumps(worlds[0].get(k), sort_keys=True, default=repr)
                      != json.dumps(worlds[1].get(k), sort_keys=True, default=repr))
        raise _fail(src, f"generate() is not deterministic: two draws with random.Random(0) differ (in {diff}); "
                         "draw everything from the rng it is given")
    tables = ask("tables")
    lacking = [t for t in tables if t not in worlds[0]] if isinstance(tables, (tuple, list)) else None
    if lacking is None:
        raise _fail(src, f"tables() must return a tuple of table names, got {type(tables).__name__}")
    if lacking:
        raise _fail(src, f"tables() names {lacking}, which generate() does not draw (it draws {sorted(worlds[0])})")
    backend = ask("backend", worlds[1])
    try:
        res = backend.call("__no_such_tool__", {})
        bad = not getattr(res, "error", False)
    except Exception as exc:  # noqa: BLE001
        raise _fail(src, _raised("the backend's call() on an unknown tool", exc) + " (it must return an error result)") from None
    if bad:
        raise _fail(src, "the backend's call() accepted an unknown tool; it must return ToolResult(error=True)")
    for method in ("fork", "fingerprint", "initial_db", "current_db", "state_view"):
        if not callable(getattr(backend, method, None)):
            raise _fail(src, f"the backend lacks {method}() of DomainBackend")
    if not isinstance(ask("system_prompt"), str):
        raise _fail(src, "system_prompt() must return text")


def _check_tools(domain: Any, src: DomainSource, names: list[str], writes: frozenset[str], ask: Any) -> None:
    import jsonschema

    from ..core.tools import ToolSet

    try:
        domain.tools(["__no_such_tool__"])
    except ValueError:
        pass
    except Exception as exc:  # noqa: BLE001
        raise _fail(src, _raised("tools() on an unknown name", exc) + " (it must raise ValueError)") from None
    else:
        raise _fail(src, "tools() accepted an unknown tool name; it must raise ValueError")
    tools = ask("tools", names)
    toolset = getattr(tools, "toolset", None)
    if not isinstance(toolset, ToolSet):
        raise _fail(src, f"tools() must return an object whose 'toolset' is a trace_gym.core.tools.ToolSet, "
                         f"got {type(toolset).__name__}")
    if sorted(toolset.names) != names:
        raise _fail(src, f"tools({names}) exposed {sorted(toolset.names)}")
    for schema in toolset.schemas():
        fn = schema.get("function") or {}
        params = fn.get("parameters")
        where = f"tool {fn.get('name')!r}"
        if not isinstance(fn.get("description"), str) or not fn.get("description"):
            raise _fail(src, f"{where} has no description")
        if not isinstance(params, dict) or params.get("type") != "object" or not isinstance(params.get("properties", {}), dict):
            raise _fail(src, f"{where}: parameters must be a JSON Schema of type 'object' with 'properties'")
        try:
            jsonschema.Draft202012Validator.check_schema(params)
        except jsonschema.exceptions.SchemaError as exc:
            raise _fail(src, f"{where}: parameters are not a valid JSON Schema: {exc.message}") from None
    kinds = getattr(tools, "kinds", None)
    if not isinstance(kinds, dict) or set(kinds) != set(names) or not set(kinds.values()) <= _KINDS:
        raise _fail(src, f"tools().kinds must give every tool one of {sorted(_KINDS)}")
    said = {n for n, k in kinds.items() if k == "write"}
    if said != set(writes):
        raise _fail(src, f"tools().kinds and write_tools() disagree: kinds say {sorted(said)} write, "
                         f"write_tools() says {sorted(writes)}")
    if not callable(getattr(tools, "validate", None)):
        raise _fail(src, "tools() must return an object with validate(name, args)")


def domain_capabilities(domain: Any) -> list[Any]:
    """The capabilities a domain says its specs train (its optional ``capabilities()``), as
    :class:`~trace_gym.analysis.labels.Capability`; ``[]`` when it does not say.

    Each item is a ``Capability`` or a mapping with ``name``, ``definition`` and
    ``starter_env`` (the id of a spec over this domain that trains it).  A malformed item is
    a :class:`DomainPluginError`.
    """
    from ..analysis.labels import Capability

    hook = getattr(domain, "capabilities", None)
    if not callable(hook):
        return []
    name = getattr(domain, "name", "?")
    out = []
    for item in hook() or ():
        if isinstance(item, Mapping):
            try:
                item = Capability.from_dict({"definition": "", **item})
            except (KeyError, TypeError) as exc:
                raise DomainPluginError(f"capability domain {name!r}: capabilities() item {dict(item)!r}: {exc}") from None
        if not isinstance(item, Capability) or not item.name:
            raise DomainPluginError(f"capability domain {name!r}: capabilities() must give Capability objects or "
                                    f"mappings with a name, got {item!r}")
        out.append(item)
    return out
