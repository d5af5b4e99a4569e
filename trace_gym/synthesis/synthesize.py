"""Turn each selected capability of a ``capabilities.json`` into a capability-env spec.

For every selected capability, in rank order:

1. **Template (offline).** When the capability maps to a starter spec whose domain is
   the target domain, that spec is the template: it is copied with a new id
   (``syn-<capability>-<domain>``) and a description that records where it came from.
   The capability's taxonomy entry names its starter (``starter_env``); the ToolSandbox
   behaviours have ``domain: toolsandbox`` starters, so ``--domain toolsandbox`` uses them.
   The domains are the capability-domain registry's
   (:func:`synthesis_domains`), never a list written here.
2. **LLM draft (optional).** Otherwise, when a chat client (:class:`~trace_gym.llm.ChatClient`)
   is given, the model drafts a spec as JSON from the capability's definition, the domain's tool names, the JSON
   Schema and an example; the draft is validated by the same loader as every spec
   (schema + semantic checks).  Rejected drafts are retried with the loader's message
   and, if still invalid, reported with their reasons.  Nothing generated is executed.
3. Otherwise the capability is reported as *not synthesized*, with the reason.

Specs are written atomically as YAML to ``out_dir`` and a report records
every outcome (``_synthesis.json``: the leading underscore keeps it out of spec
discovery).  An existing spec with the same id is kept (resume) unless
``overwrite`` is set.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..analysis.taxonomy import TAXONOMY
from ..capabilities.entries import starter_specs_dir
from ..io import atomic_write_json, atomic_write_text
from ..llm.base import ChatClient

__all__ = ["SynthesisOutcome", "synthesize", "starter_specs_dir", "spec_id_for", "synthesis_domains"]


@dataclass
class SynthesisOutcome:
    capability: str
    status: str  # "template" | "llm" | "kept" | "rejected" | "skipped"
    spec_id: str | None = None
    path: str | None = None
    template: str | None = None
    reasons: list[str] = field(default_factory=list)



def synthesis_domains() -> list[str]:
    """The domains specs can be synthesized for: those the capability-domain registry knows (plug-ins included)."""
    from ..capabilities.domains import domain_names

    return domain_names()


def _domain_starters(domain: str, starters: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Capability name -> the id of a spec over ``domain`` that trains it, as the domain's optional
    ``capabilities()`` says (:func:`~trace_gym.capabilities.plugins.domain_capabilities`).  Those specs are
    found in the spec folders (``TRACE_GYM_ENVS_DIR`` included) and added to ``starters``."""
    from ..capabilities.domains import get_domain
    from ..capabilities.entries import spec_files
    from ..capabilities.plugins import domain_capabilities

    caps = domain_capabilities(get_domain(domain))
    wanted = {c.starter_env for c in caps if c.starter_env}
    for p in spec_files() if wanted else ():
        if p.stem in wanted and p.stem not in starters:
            doc = yaml.safe_load(p.read_text(encoding="utf-8"))
            if isinstance(doc, dict) and doc.get("id") == p.stem and doc.get("domain") == domain:
                starters[p.stem] = {"path": p, "doc": doc}
    return {c.name: c.starter_env for c in caps if c.starter_env in starters}


def _domain_tools(domain: str) -> list[str]:
    """The agent tools a draft may expose, then (dual control, e.g. telecom) the user's device tools,
    marked as usable only in the scripted user's ``do`` rules."""
    from ..capabilities.domains import get_domain

    dom = get_domain(domain)
    user_tools = getattr(dom, "user_tool_names", None)
    user = sorted(user_tools()) if user_tools is not None else []
    return sorted(dom.tool_names()) + [f"{n} (user's device: only in a user rule's do)" for n in user]


def spec_id_for(capability: str, domain: str) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in capability.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"syn-{slug}-{domain}"


def _starters() -> dict[str, dict[str, Any]]:
    out = {}
    for p in sorted(starter_specs_dir().glob("*.y*ml")) + sorted(starter_specs_dir().glob("*.json")):
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and "id" in doc:
            out[doc["id"]] = {"path": p, "doc": doc}
    return out


def _template_for(capability: str, definition: str | None, starters: dict[str, dict[str, Any]]) -> str | None:
    for c in TAXONOMY:
        if c.name == capability and c.starter_env in starters:
            return c.starter_env
    # a capability named after a starter (e.g. discovered as "refund-policy") matches by words
    words = set(capability.lower().replace("_", "-").split("-")) - {"and", "the", "of", "compliance"}
    for sid in starters:
        swords = set(sid.lower().split("-")) - {"cap"}
        if words and words <= swords | {"compliance"}:
            return sid
    return None


def _validate(doc: dict[str, Any], source: str) -> str | None:
    from ..capabilities.spec import SpecError, parse_spec

    try:
        parse_spec(doc, source)
    except SpecError as exc:
        return str(exc)
    except Exception as exc:  # a malformed draft must be reported, not crash synthesis
        return f"{type(exc).__name__}: {exc}"
    return None


def _llm_draft(client: ChatClient, cap: dict[str, Any], domain: str, spec_id: str, example: dict[str, Any], tools: list[str],
               retries: int, seed: int) -> tuple[dict[str, Any] | None, list[str]]:
    from ..analysis.labelers.llm import extract_json
    from ..capabilities.spec import schema

    prompt = resources.files("trace_gym.synthesis").joinpath("prompts", "draft_spec.md").read_text(encoding="utf-8").format(
        name=cap["name"], definition=cap.get("definition", ""), domain=domain, tools=", ".join(tools),
        schema=json.dumps(schema()), example=json.dumps(example), spec_id=spec_id)
    messages = [{"role": "user", "content": prompt}]
    reasons = []
    for attempt in range(retries + 1):
        answer = client.chat(messages, seed=seed + attempt, temperature=0.7).text
        try:
            doc = extract_json(answer)
        except ValueError as exc:
            problem = f"not JSON: {exc}"
        else:
            if isinstance(doc, dict):
                doc["id"], doc["domain"] = spec_id, domain
                problem = _validate(doc, f"<draft {attempt + 1} for {cap['name']}>")
                if problem is None:
                    return doc, reasons
            else:
                problem = "the answer is not a JSON object"
        reasons.append(problem)
        messages = messages + [{"role": "assistant", "content": answer},
                               {"role": "user", "content": f"The specification was rejected: {problem}. Reply with a corrected JSON document only."}]
    return None, reasons


def synthesize(capabilities_doc: dict[str, Any], domain: str, out_dir: str | Path, *, client: ChatClient | None = None,
               retries: int = 2, seed: int = 0, overwrite: bool = False, only: list[str] | None = None) -> list[SynthesisOutcome]:
    if domain not in synthesis_domains():
        raise ValueError(f"unknown domain {domain!r}; expected one of {synthesis_domains()}")
    out = Path(out_dir)
    starters = _starters()
    own = _domain_starters(domain, starters)  # a domain's own specs come first (plug-in domains name theirs)
    candidates = {c["name"]: c for c in capabilities_doc.get("candidates", [])}
    names = only or capabilities_doc.get("selected", [])
    outcomes: list[SynthesisOutcome] = []
    for name in names:
        cap = candidates.get(name, {"name": name, "definition": ""})
        spec_id = spec_id_for(name, domain)
        path = out / f"{spec_id}.yaml"
        if path.exists() and not overwrite:
            outcomes.append(SynthesisOutcome(name, "kept", spec_id, str(path)))
            continue
        template = own.get(name) or _template_for(name, cap.get("definition"), starters)
        if template is not None and starters[template]["doc"].get("domain") == domain:
            doc = dict(starters[template]["doc"])
            doc["id"] = spec_id
            doc["description"] = (f"Synthesized for capability '{name}' from the starter template {template}. "
                                  + str(doc.get("description", ""))).strip()
            problem = _validate(doc, str(path))
            if problem is None:
                atomic_write_text(path, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120))
                outcomes.append(SynthesisOutcome(name, "template", spec_id, str(path), template))
                continue
            outcomes.append(SynthesisOutcome(name, "rejected", spec_id, None, template, [problem]))
            continue
        why = (f"starter template {template} targets the {starters[template]['doc'].get('domain')} domain, not {domain}"
               if template else "no starter template matches this capability")
        if client is None:
            outcomes.append(SynthesisOutcome(name, "skipped", spec_id, None, template, [why + "; pass an LLM endpoint to draft one"]))
            continue
        example = next((s["doc"] for s in starters.values() if s["doc"].get("domain") == domain), next(iter(starters.values()))["doc"])
        tools = _domain_tools(domain)
        doc, reasons = _llm_draft(client, cap, domain, spec_id, example, tools, retries, seed)
        if doc is None:
            outcomes.append(SynthesisOutcome(name, "rejected", spec_id, None, template, [why, *reasons]))
            continue
        atomic_write_text(path, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120))
        outcomes.append(SynthesisOutcome(name, "llm", spec_id, str(path), template, reasons))
    atomic_write_json(out / "_synthesis.json", {"domain": domain, "outcomes": [asdict(o) for o in outcomes]})
    return outcomes
