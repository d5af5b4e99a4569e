"""Capability-environment specs: load, validate against the published JSON Schema, check.

A spec is YAML or JSON.  :func:`load_spec` rejects a bad spec with a :class:`SpecError`
whose message names the file, the place inside it (``cases[1].rewards[0].tool``) and
what was expected.  Reading is bounded (size, encoding, nesting, aliases, duplicate keys:
see :mod:`trace_gym.capabilities.specfile`).  Beyond the schema it checks what a schema
cannot: every number is finite, tool names exist in the domain and are exposed, knobs
referenced are declared, placeholders name declared slots, filters exist, every matcher
operator is known and well-formed, and each reward kind carries only its own keys.

:func:`load_spec` and :func:`parse_spec` raise :class:`SpecError` (a ``ValueError``) and
nothing else for a bad spec, whatever the file holds.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from .domains import get_domain
from .matchers import matcher_problem
from .spec_doc import CapabilitySpec, resolve_number
from .specfile import SpecError, check_shape, parse_spec_text, read_spec_document, read_spec_text
from .tau2_tools import READ_TOOLS, WRITE_TOOLS
from .templating import FILTERS, placeholders

__all__ = ["SpecError", "CapabilitySpec", "load_spec", "parse_spec", "check_schema", "check_spec_file", "SCHEMA_PATH", "schema",
           "READ_TOOLS", "WRITE_TOOLS", "resolve_number"]

SCHEMA_PATH = Path(__file__).with_name("schema") / "capability_env.schema.json"
def domain_tools(domain: str) -> set[str]:
    """Every agent tool of the domain (as listed in the benchmark's tools.json)."""
    return set(get_domain(domain).tool_names())


_REWARD_KEYS = {
    "required_call": {"tool", "args", "partial"},
    "forbidden_call": {"tool", "args", "count_errors"},
    "db": {"path", "match"},
    "no_mutation": set(),
    "no_collateral": {"allow"},
    "refusal": {"phrases"},
    "communicated": {"any_of", "all_of"},
    "ordering": {"first", "then", "if_missing"},
}
_COMMON_REWARD_KEYS = {"type", "name", "weight", "gate"}


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The published JSON Schema for capability specs."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


def _where(path: Any) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def load_spec(path: str | Path) -> CapabilitySpec:
    """Read, validate and check one spec file."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(str(p), "", "an existing .yaml, .yml or .json file")
    spec = parse_spec(read_spec_document(p), str(p))
    _check_file_name(p, spec.id)
    return spec


def check_spec_file(path: str | Path, text: str | None = None) -> None:
    """The cheap checks of one spec file (``text``: its contents, when already read): the reading
    limits, the JSON Schema, the id against the file name and that the domain is registered (a
    built-in or a plug-in; nothing is imported), without reading any domain data (:func:`load_spec`
    adds the checks that need the domain).  Raises :class:`SpecError`."""
    from .domains import domain_names

    p = Path(path)
    doc = parse_spec_text(read_spec_text(p) if text is None else text, str(p), json_syntax=p.suffix == ".json")
    check_schema(doc, str(p))
    _check_file_name(p, doc["id"])
    known = domain_names()
    if doc["domain"] not in known:
        raise SpecError(str(p), "domain", f"a registered domain (one of {known}; a plug-in is registered with "
                        f"TRACE_GYM_DOMAINS or the trace_gym.domains entry points), got {doc['domain']!r}")


def _check_file_name(p: Path, spec_id: str) -> None:
    if p.stem != spec_id and not p.stem.startswith(spec_id + "."):
        raise SpecError(str(p), "id", f"the file name without extension ({p.stem!r}, or {p.stem!r} starting with the id and a dot), got {spec_id!r}")


def parse_spec(doc: Any, source: str = "<spec>") -> CapabilitySpec:
    """Validate an already-parsed document (schema, then the semantic checks)."""
    check_schema(doc, source)
    _check(doc, source)
    return CapabilitySpec(doc, source, list(doc["tools"]))


def check_schema(doc: Any, source: str = "<spec>") -> None:
    """The document's shape, plain finite values and the JSON Schema (no domain data is read)."""
    if not isinstance(doc, dict):
        raise SpecError(source, "", f"a mapping at the top level, got {type(doc).__name__}")
    check_shape(doc, source)
    try:
        json.dumps(doc)
    except ValueError:
        raise SpecError(source, "", "a tree of plain values (a YAML anchor may not contain itself)") from None
    except TypeError as exc:
        raise SpecError(source, "", f"plain JSON-compatible values only ({exc})") from None
    _check_values(doc, source)
    errors = sorted(_validator().iter_errors(doc), key=lambda e: (len(list(e.absolute_path)), list(map(str, e.absolute_path))))
    if errors:
        err = jsonschema.exceptions.best_match(errors)
        expected = err.schema.get("description") if isinstance(err.schema, dict) else None
        msg = err.message + (f" (expected: {expected})" if expected else "")
        raise SpecError(source, _where(err.absolute_path), msg)


def _check_values(doc: Any, src: str) -> None:
    """Every number finite and every mapping key a string (the tree is bounded by :func:`check_shape`)."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            raise SpecError(src, where, f"a finite number, got {node}")
        if isinstance(node, dict):
            for k, v in node.items():
                if not isinstance(k, str):
                    raise SpecError(src, f"{where}.{k}" if where else str(k), f"a text key, got {type(k).__name__} {k!r}")
                stack.append((v, f"{where}.{k}" if where else k))
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))


def _check(doc: dict[str, Any], src: str) -> None:
    domain = doc["domain"]
    try:
        get_domain(domain)  # an unknown name, or a plug-in domain that cannot be used: the spec's error
    except ValueError as exc:
        raise SpecError(src, "domain", str(exc)) from None
    known = sorted(domain_tools(domain))
    for i, t in enumerate(doc["tools"]):
        if t not in known:
            raise SpecError(src, f"tools[{i}]", f"unknown {domain} tool {t!r}; expected one of {known}")
    exposed_all = set(doc["tools"])
    knobs = doc.get("difficulty", {})
    for name, k in knobs.items():
        if not k["min"] <= k["default"] <= k["max"]:
            raise SpecError(src, f"difficulty.{name}", f"default {k['default']} within [min, max] = [{k['min']}, {k['max']}]")
    _check_knob_refs(doc, knobs, src, "")
    steps = doc.get("max_steps", 30)
    fewest = int(knobs[steps["knob"]]["min"]) if isinstance(steps, dict) and not steps.get("complement") and "scale" not in steps else steps
    if isinstance(fewest, int):
        longest = max(len(c["reference"]) for c in doc["cases"])
        if fewest < longest:
            raise SpecError(src, "max_steps", f"a step limit (at its lowest setting) of at least the longest reference solution "
                                              f"({longest} steps), got {fewest}")
    dom = get_domain(domain)  # the domain answers for its tables, write tools and clonable tables
    tables = dom.tables()
    names = [c["name"] for c in doc["cases"]]
    for i, c in enumerate(doc["cases"]):
        base = f"cases[{i}]"
        if c["name"] in names[:i]:
            raise SpecError(src, f"{base}.name", f"a unique case name; {c['name']!r} is used twice")
        slots: list[str] = []
        for sname, slot in c["slots"].items():
            where = f"{base}.slots.{sname}"
            frm = slot["from"]
            if frm not in tables and not (frm.startswith("{") and frm.endswith("}")):
                raise SpecError(src, f"{where}.from", f"a table of the {domain} database {list(tables)} or a {{slot.path}} placeholder, got {frm!r}")
            for d in slot.get("distinct_from", []):
                if d not in slots:
                    raise SpecError(src, f"{where}.distinct_from", f"a slot declared before {sname!r}, got {d!r}")
            if slot.get("pick") in ("min", "max") and "by" not in slot:
                raise SpecError(src, f"{where}.by", f"a path to order by when pick is {slot['pick']!r}")
            _check_placeholders(slot, slots + ["knobs", "now"], src, where)
            for path, m in (slot.get("where") or {}).items():
                problem = matcher_problem(m)
                if problem:
                    raise SpecError(src, f"{where}.where.{path}", f"a well-formed matcher: {problem}")
            slots.append(sname)
        roots = slots + ["knobs", "now"]
        for j, d in enumerate(c.get("distractors", [])):
            if d["like"] not in slots:
                raise SpecError(src, f"{base}.distractors[{j}].like", f"a declared slot {slots}, got {d['like']!r}")
            if d["table"] not in dom.clonable():
                raise SpecError(src, f"{base}.distractors[{j}].table", f"one of {list(dom.clonable())} for the {domain} domain, got {d['table']!r}")
            _check_placeholders(d.get("set", {}), slots + ["knobs", "now"], src, f"{base}.distractors[{j}].set")
        for key in ("opening", "user", "hint", "reference", "unauthorized"):
            if key in c:
                _check_placeholders(c[key], roots, src, f"{base}.{key}")
        for k, t in enumerate(c.get("tools", [])):
            if t not in exposed_all:
                raise SpecError(src, f"{base}.tools[{k}]", f"one of the spec's tools {doc['tools']}, got {t!r}")
        exposed = set(c.get("tools", doc["tools"]))  # what this case's episodes offer
        for j, step in enumerate(c["reference"]):
            if "call" in step and step["call"] not in exposed:
                raise SpecError(src, f"{base}.reference[{j}].call", f"one of the exposed tools {sorted(exposed)}, got {step['call']!r}")
        for j, step in enumerate(c.get("unauthorized", [])):
            if step["call"] not in dom.write_tools() or step["call"] not in exposed:
                raise SpecError(src, f"{base}.unauthorized[{j}].call", f"an exposed write tool, got {step['call']!r}")
        rnames: list[str] = []
        for j, r in enumerate(c["rewards"]):
            where = f"{base}.rewards[{j}]"
            extra = set(r) - _COMMON_REWARD_KEYS - _REWARD_KEYS[r["type"]]
            if extra:
                raise SpecError(src, f"{where}.{sorted(extra)[0]}", f"only {sorted(_COMMON_REWARD_KEYS | _REWARD_KEYS[r['type']])} for a {r['type']!r} reward")
            for ev_key in ("tool",):
                if ev_key in r and r[ev_key] not in exposed:
                    raise SpecError(src, f"{where}.tool", f"one of the exposed tools {sorted(exposed)}, got {r[ev_key]!r}")
            for ev_key in ("first", "then"):
                ev = r.get(ev_key)
                if ev is not None:
                    kinds = [k for k in ("call", "agent_says_any", "user_says_any") if k in ev]
                    if len(kinds) != 1 or (("args" in ev or "attempted" in ev) and "call" not in ev):
                        raise SpecError(src, f"{where}.{ev_key}", "exactly one of call (with optional args and attempted), agent_says_any, user_says_any")
                    if "call" in ev and ev["call"] not in exposed:
                        raise SpecError(src, f"{where}.{ev_key}.call", f"one of the exposed tools {sorted(exposed)}, got {ev['call']!r}")
            matchers = [("match", r["match"])] if "match" in r else []
            matchers += [(f"args.{k}", v) for k, v in (r.get("args") or {}).items()]
            for ev_key in ("first", "then"):
                matchers += [(f"{ev_key}.args.{k}", v) for k, v in ((r.get(ev_key) or {}).get("args") or {}).items()]
            for mpath, m in matchers:
                problem = matcher_problem(m)
                if problem:
                    raise SpecError(src, f"{where}.{mpath}", f"a well-formed matcher: {problem}")
            name = r.get("name") or f"{r['type']}_{j}"
            if name in rnames:
                raise SpecError(src, f"{where}.name", f"a unique component name; {name!r} is used twice")
            rnames.append(name)
            _check_placeholders(r, roots, src, where)
        if not any(not r.get("gate") for r in c["rewards"]):
            raise SpecError(src, f"{base}.rewards", "at least one component that is not a gate (partial credit comes from those)")
    _check_user_calls(doc, dom, src)
    dom.check_spec(doc, src)  # what only the domain can check (sizes, fields, slots that can be filled)


def _check_user_calls(doc: dict[str, Any], dom: Any, src: str) -> None:
    """Every scripted-user rule's ``do`` calls name tools the user has on the domain's device (dual control)."""
    known = sorted(dom.user_tool_names())
    places = [("user", doc.get("user") or {})] + [(f"cases[{i}].user", c.get("user") or {}) for i, c in enumerate(doc["cases"])]
    for base, user in places:
        for i, rule in enumerate(user.get("rules", [])):
            for j, step in enumerate(rule.get("do", [])):
                if not known:
                    raise SpecError(src, f"{base}.rules[{i}].do", f"no user tool calls: the {doc['domain']} domain has no user-side "
                                                                   "tools (dual control is telecom's)")
                if step["call"] not in known:
                    raise SpecError(src, f"{base}.rules[{i}].do[{j}].call", f"a user tool of the {doc['domain']} domain {known}, "
                                                                             f"got {step['call']!r}")


def _check_knob_refs(node: Any, knobs: dict[str, Any], src: str, where: str) -> None:
    if isinstance(node, dict):
        if set(node) >= {"knob"} and set(node) <= {"knob", "complement", "scale"} and isinstance(node.get("knob"), str):
            if node["knob"] not in knobs:
                raise SpecError(src, where, f"a declared difficulty knob {sorted(knobs)}, got {node['knob']!r}")
            return
        for k, v in node.items():
            _check_knob_refs(v, knobs, src, f"{where}.{k}" if where else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _check_knob_refs(v, knobs, src, f"{where}[{i}]")


def _check_placeholders(node: Any, roots: list[str], src: str, where: str) -> None:
    for expr in placeholders(node):
        path, *filters = expr.split("|")
        root = path.strip().split(".")[0]
        if root not in roots:
            raise SpecError(src, where, f"placeholders naming a declared slot {roots}; {{{expr}}} names {root!r}")
        for f in filters:
            if f.split(":")[0].strip() not in FILTERS:
                raise SpecError(src, where, f"a known filter {list(FILTERS)} in {{{expr}}}")
