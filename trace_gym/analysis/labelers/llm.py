"""An LLM labeler (and capability discovery) over any :class:`~trace_gym.llm.ChatClient`.

Prompts are package data (``trace_gym/analysis/prompts``).  Each answer is parsed as
JSON and validated against a schema; an invalid answer is retried with a note that
says what was wrong, up to ``retries`` times.  Pairs that never get a valid label are
listed in ``LabelRun.unlabeled`` and counted in ``LabelRun.malformed``.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import jsonschema

from ...core.outcome import is_success
from ...llm.base import ChatClient
from ..labels import Capability, Evidence, Label, LabelRun, LabelValue
from .base import LabelingItem

__all__ = ["LLMLabeler", "discover_capabilities", "render_transcript", "extract_json"]

LABELS_SCHEMA = {
    "type": "object",
    "required": ["labels"],
    "properties": {
        "labels": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["capability", "label"],
                "properties": {
                    "capability": {"type": "string"},
                    "label": {"enum": ["NA", "PRESENT", "LACKING"]},
                    "turn": {"type": ["integer", "null"]},
                    "evidence": {"type": "string"},
                },
            },
        }
    },
}

DISCOVERY_SCHEMA = {
    "type": "object",
    "required": ["capabilities"],
    "properties": {
        "capabilities": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "definition"],
                "properties": {
                    "name": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
                    "definition": {"type": "string", "minLength": 10},
                    "example_task_ids": {"type": "array", "items": {"type": "string"}},
                },
            },
        }
    },
}


def _prompt(name: str) -> str:
    return resources.files("trace_gym.analysis").joinpath("prompts", name).read_text(encoding="utf-8")


def extract_json(text: str) -> Any:
    """The first JSON object in a model answer (code fences and chatter around it allowed)."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in the answer")
    obj, _ = json.JSONDecoder().raw_decode(text[start:])
    return obj


def render_transcript(messages: list[dict[str, Any]], limit: int = 12000) -> str:
    lines = []
    for i, m in enumerate(messages):
        if m.get("role") == "system" or m.get("name") == "env_feedback":
            continue
        if m.get("tool_calls"):
            calls = "; ".join(f"{tc['function']['name']}({tc['function']['arguments']})" for tc in m["tool_calls"])
            lines.append(f"[{i}] assistant calls: {calls}")
        else:
            lines.append(f"[{i}] {m['role']}: {m.get('content') or ''}")
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit // 2] + "\n[...]\n" + text[-limit // 2 :]


class LLMLabeler:
    name = "llm"

    def __init__(self, client: ChatClient, retries: int = 2, temperature: float = 0.7):
        self.client, self.retries, self.temperature = client, retries, temperature

    def _ask(self, messages: list[dict[str, Any]], schema: dict[str, Any], seed: int, check) -> tuple[Any | None, int]:
        """Ask, validate, retry; returns (parsed or None, number of malformed answers)."""
        bad = 0
        convo = list(messages)
        for attempt in range(self.retries + 1):
            answer = self.client.chat(convo, seed=seed + attempt, temperature=self.temperature).text
            try:
                obj = extract_json(answer)
                jsonschema.validate(obj, schema)
                check(obj)
                return obj, bad
            except (ValueError, jsonschema.ValidationError) as exc:
                bad += 1
                reason = exc.message if isinstance(exc, jsonschema.ValidationError) else str(exc)
                convo = messages + [
                    {"role": "assistant", "content": answer},
                    {"role": "user", "content": f"That answer was not usable: {reason}. Reply with the JSON object only."},
                ]
        return None, bad

    def label(self, items: list[LabelingItem], capabilities: list[Capability], *, run: int, seed: int) -> LabelRun:
        out = LabelRun(run=run, seed=seed)
        names = [c.name for c in capabilities]
        caps_text = "\n".join(f"- {c.name}: {c.definition}" for c in capabilities)
        for n, item in enumerate(items):
            outcome = "the task was completed" if is_success(item.reward) else f"the task failed (reward {item.reward:g})"
            prompt = _prompt("label.md").format(capabilities=caps_text, outcome=outcome,
                                                transcript=render_transcript(item.messages), names=", ".join(names))

            def check(obj: dict[str, Any]) -> None:
                got = [x["capability"] for x in obj["labels"]]
                missing = sorted(set(names) - set(got))
                if missing:
                    raise ValueError(f"missing labels for {missing}")

            obj, bad = self._ask([{"role": "user", "content": prompt}], LABELS_SCHEMA, seed * 100_003 + n * 7, check)
            if obj is None:
                out.malformed += 1
                out.unlabeled.extend((item.trajectory_id, c) for c in names)
                continue
            seen = set()
            for x in obj["labels"]:
                if x["capability"] in names and x["capability"] not in seen:
                    seen.add(x["capability"])
                    ev = Evidence(x.get("evidence", ""), x.get("turn"))
                    out.labels.append(Label(item.trajectory_id, x["capability"], LabelValue(x["label"]), (ev,)))
        return out


def discover_capabilities(client: ChatClient, items: list[LabelingItem], *, seed: int = 0, min_caps: int = 3,
                          max_caps: int = 8, per_group: int = 6, retries: int = 2) -> tuple[list[Capability], int]:
    """One discovery pass: propose general capabilities from failed vs passed trajectories.

    Returns the capabilities and the number of malformed answers; raises ``RuntimeError``
    when no valid answer came back after the retries.
    """
    failed = [i for i in items if not is_success(i.reward)][:per_group]
    passed = [i for i in items if is_success(i.reward)][:per_group]

    def block(group: list[LabelingItem]) -> str:
        return "\n\n".join(f"task {i.task_id or i.trajectory_id}:\n{render_transcript(i.messages, 2500)}" for i in group) or "(none)"

    prompt = _prompt("discover.md").format(failed=block(failed), passed=block(passed), min_caps=min_caps, max_caps=max_caps)
    labeler = LLMLabeler(client, retries=retries)
    obj, bad = labeler._ask([{"role": "user", "content": prompt}], DISCOVERY_SCHEMA, seed, lambda o: None)
    if obj is None:
        raise RuntimeError(f"capability discovery failed: {bad} malformed answers from {client.model}")
    caps, seen = [], set()
    for c in obj["capabilities"]:
        if c["name"] not in seen:
            seen.add(c["name"])
            caps.append(Capability(c["name"], c["definition"], tuple(c.get("example_task_ids", []))))
    return caps, bad
