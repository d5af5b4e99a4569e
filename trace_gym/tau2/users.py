"""User simulators for the τ²-bench gym environments.

Every simulator implements the core seam :class:`~trace_gym.core.users.UserSimulator`:
``reset(context)`` once per episode with a :class:`UserContext`, then
``respond(incoming)`` whenever it is the user's turn.  ``incoming`` holds what the user
sees since its last turn — the agent's text message, or the results of the user's own
tool calls — as τ²-form dicts.  ``respond`` returns one
:class:`~trace_gym.core.users.UserTurn`, which reads as the τ² user message
``{"role": "user", "content": str | None, "tool_calls": None | [{"name", "arguments"}]}``
(the environment assigns call ids, executes the calls with requestor ``user`` — on the
telecom phone, :mod:`trace_gym.tau2.domains.telecom_user` — and calls ``respond`` again
with their results).  A user text containing ``###STOP###``, ``###TRANSFER###`` or
``###OUT-OF-SCOPE###`` ends the episode (the turn's ``end`` flag says the same).

* :class:`OfflineUser` (default) — deterministic, rule-based, needs no model.  It opens
  with the scenario's reason for contacting and the known information, answers
  confirmation requests with "yes", carries out device actions the agent names
  (telecom/mock user tools without required arguments), and stops politely once the
  agent signals completion or after ``max_turns`` turns; of a very long agent message it
  reads the start and the end (:data:`READ_CHARS` each).  **Its scores are not
  comparable to scores obtained with tau2's LLM user**; use it for smoke tests,
  speed, and as a cheap training signal.
* :class:`LLMUser` — tau2's user simulation: tau2's guideline files (read at run time from
  the data folder, ``tau2/user_simulator/*.md``) plus the task's user scenario as the
  system prompt, the conversation with roles flipped, and the user's tools, over any
  :class:`~trace_gym.llm.ChatClient` (an OpenAI-compatible endpoint, a local Hugging
  Face model, a cassette).  Tool calls a model writes as text are parsed with
  :func:`trace_gym.core.toolcalls.parse_action`; each call's seed comes from the
  episode's generator.
* :class:`ReplayUser` — replays the user turns of a recorded conversation, then stops.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from trace_gym.core.users import STOP, ReplayTurns, UserSimulator, UserTurn
from trace_gym.llm import ask_model
from trace_gym.llm.base import ChatClient, ChatReply

__all__ = [
    "STOP",
    "TRANSFER",
    "OUT_OF_SCOPE",
    "UserContext",
    "UserSimulator",
    "UserTurn",
    "OfflineUser",
    "LLMUser",
    "ReplayUser",
    "is_user_stop",
    "scenario_text",
    "user_system_prompt",
    "make_user",
]

TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"


def is_user_stop(message: Mapping[str, Any]) -> bool:
    """tau2's rule: a user *text* message containing any of the three tokens ends the episode."""
    if message.get("tool_calls") is not None:
        return False
    content = message.get("content")
    return isinstance(content, str) and (STOP in content or TRANSFER in content or OUT_OF_SCOPE in content)


def _text_turn(content: str | None) -> UserTurn:
    turn = UserTurn(content)
    return UserTurn(content, end=True) if is_user_stop(turn) else turn


@dataclass
class UserContext:
    """What a simulator gets at the start of an episode."""

    task: Mapping[str, Any]
    domain: str
    tools: list[dict[str, Any]] = field(default_factory=list)  # the user's OpenAI tool schemas ([] if none)
    history: list[dict[str, Any]] = field(default_factory=list)  # user-visible τ² messages of the task's history
    rng: np.random.Generator | None = None
    data_dir: str | Path | None = None


# --------------------------------------------------------------------------- scenario text


def _indent(text: str) -> str:
    return textwrap.indent(text, "\t")


def scenario_text(user_scenario: Mapping[str, Any]) -> str:
    """The user scenario rendered as tau2's ``str(UserScenario)`` renders it."""
    lines = []
    if user_scenario.get("persona") is not None:
        lines += ["Persona:", _indent(user_scenario["persona"])]
    ins = user_scenario.get("instructions")
    if isinstance(ins, Mapping):
        parts = [f"Domain: {ins.get('domain')}", f"Reason for call:\n{_indent(ins.get('reason_for_call') or '')}"]
        if ins.get("known_info") is not None:
            parts.append(f"Known info:\n{_indent(ins['known_info'])}")
        if ins.get("unknown_info") is not None:
            parts.append(f"Unknown info:\n{_indent(ins['unknown_info'])}")
        parts.append(f"Task instructions:\n{_indent(ins.get('task_instructions') or '')}")
        ins_text = "\n".join(parts)
    else:
        ins_text = str(ins)
    lines += ["Instructions:", _indent(ins_text)]
    return "\n".join(lines)


def _guidelines_dir(data_dir: str | Path | None) -> Path:
    from trace_gym.data import tau2_data_dir

    root = Path(data_dir) if data_dir is not None else tau2_data_dir()
    for cand in (root / "tau2" / "user_simulator", root / "user_simulator"):
        if cand.is_dir():
            return cand
    from trace_gym.data import DataDirError

    raise DataDirError(f"τ²-bench user simulation guidelines not found under {root} (expected tau2/user_simulator/); see `trace-gym data status`")


def user_system_prompt(task: Mapping[str, Any], *, with_tools: bool, data_dir: str | Path | None = None) -> str:
    """tau2's user-simulator system prompt: guidelines (tools variant when the user has tools) + scenario."""
    name = "simulation_guidelines_tools.md" if with_tools else "simulation_guidelines.md"
    guidelines = (_guidelines_dir(data_dir) / name).read_text(encoding="utf-8").replace("<PERSONA_GUIDELINES>", "")
    return f"{guidelines}\n\n<scenario>\n{scenario_text(task.get('user_scenario') or {})}\n</scenario>"


# --------------------------------------------------------------------------- offline user

_OBJECT_CONTEXT = (r"(to|for|with|at|from|about|help|helps|tell|tells|told|ask|asks|asked|give|gives|gave|send|"
                   r"sends|sent|call|calls|contact|contacts|let|lets|offer|offers|offered|assist|assists|than|"
                   r"charge|charged|refund|refunded|email|emailed|remind|reminded|thank|see|sees)")
_PRONOUNS = [
    (re.compile(r"\byou are\b", re.I), "I am"),
    (re.compile(r"\byou're\b", re.I), "I'm"),
    (re.compile(r"\byou were\b", re.I), "I was"),
    (re.compile(r"\byou've\b", re.I), "I've"),
    (re.compile(r"\byou'd\b", re.I), "I'd"),
    (re.compile(r"\byou'll\b", re.I), "I'll"),
    (re.compile(r"\byourself\b", re.I), "myself"),
    (re.compile(r"\byours\b", re.I), "mine"),
    (re.compile(r"\byour\b", re.I), "my"),
    (re.compile(r"\b" + _OBJECT_CONTEXT + r"\s+you\b", re.I), r"\1 me"),
    (re.compile(r"\byou\b", re.I), "I"),
]
@lru_cache(maxsize=4096)
def first_person(text: str) -> str:
    """Turn second-person scenario text ("You want to cancel ...") into the user's own voice."""
    out = text
    for pat, rep in _PRONOUNS:
        out = pat.sub(rep, out)
    out = out.replace("I are", "I am")
    out = re.sub(r"(^|[.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), out.strip())
    return re.sub(r"\s+", " ", out).strip()


_CONFIRM = re.compile(
    r"\b(confirm|proceed|go ahead|would you like (me )?to|shall i|should i|do you want (me )?to|"
    r"is that (correct|right|ok)|\(yes/no\)|yes or no|can you confirm|are you sure)\b",
    re.I,
)
_DONE = re.compile(
    r"\b(anything else|is there anything|have a (great|nice|good) day|successfully|has been (cancell?ed|updated|"
    r"modified|processed|exchanged|returned|booked|changed|created|completed|resolved|refunded)|"
    r"all set|is now (resolved|fixed|working))\b",
    re.I,
)
_TRANSFER = re.compile(r"\btransfer(red|ring)?\b.*\b(human|agent|representative|specialist)\b", re.I | re.S)
_ASKS = re.compile(
    r"\b(user ?id|email|name|zip|postal|order (id|number)|reservation|phone|number|address|provide|could you tell|"
    r"can you tell|may i have|what is your|which)\b|\?",
    re.I,
)
_LOOK_VERBS = re.compile(r"\b(check|look|see|what|tell me|verify|confirm|status|shows?|read)\b", re.I)
_TOOL_FILLER = {"check", "toggle", "my", "your", "the", "a", "set", "status", "get"}
# The offline user reads at most this many characters from each end of the agent's text: what a
# message asks or says is at its start or end, and its rules then cost the same for any length.
READ_CHARS = 4000


def _readable(text: str) -> str:
    """``text``, or its first and last :data:`READ_CHARS` characters when it is longer than twice that."""
    return text if len(text) <= 2 * READ_CHARS else f"{text[:READ_CHARS]}\n\n{text[-READ_CHARS:]}"


class OfflineUser:
    """Deterministic rule-based user (see the module docstring); its scores are not LLM-user scores."""

    def __init__(self, max_turns: int = 12, confirm_reply: str = "Yes, please go ahead.",
                 stop_reply: str = "Thank you, that's everything I needed. ###STOP###"):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.max_turns = max_turns
        self.confirm_reply = confirm_reply
        self.stop_reply = stop_reply
        self._turns = 0
        self._opening = ""
        self._known = ""
        self._tools: list[dict[str, Any]] = []
        self._done_tools: set[str] = set()

    def reset(self, context: UserContext) -> None:
        self._turns = 0
        self._done_tools = set()
        self._tools = [t["function"] for t in context.tools if isinstance(t, Mapping) and "function" in t]
        ins = (context.task.get("user_scenario") or {}).get("instructions")
        if isinstance(ins, Mapping):
            reason = first_person(ins.get("reason_for_call") or "")
            self._known = first_person(ins.get("known_info") or "")
        else:
            reason = first_person(str(ins or ""))
            self._known = ""
        self._opening = " ".join(p for p in ("Hi!", reason, self._known) if p)

    def _tool_request(self, text: str) -> UserTurn | None:
        """A user tool the agent's message names (all its key words present), without required arguments."""
        low = text.lower()
        words_in = set(re.findall(r"[a-z0-9]+", low))
        best: tuple[int, int, dict[str, Any]] | None = None
        looking = bool(_LOOK_VERBS.search(text))
        for order, fn in enumerate(self._tools):
            name = fn.get("name", "")
            required = (fn.get("parameters") or {}).get("required") or []
            if required or name in self._done_tools:
                continue
            spaced = name.replace("_", " ")
            keys = [w for w in name.split("_") if w not in _TOOL_FILLER] or name.split("_")
            if spaced in low or all(k in words_in for k in keys):
                score = len(keys) + (1 if name.startswith("check") == looking else 0) + (5 if spaced in low else 0)
                if best is None or score > best[0]:
                    best = (score, -order, fn)
        if best is None:
            return None
        self._done_tools.add(best[2]["name"])
        return UserTurn(None, ({"name": best[2]["name"], "arguments": {}},))

    def respond(self, incoming: Sequence[Mapping[str, Any]]) -> UserTurn:
        self._turns += 1
        if self._turns == 1 and not any(m.get("role") == "tool" for m in incoming):
            return _text_turn(self._opening or "Hi, I need some help.")
        if incoming and all(m.get("role") == "tool" for m in incoming):
            shown = " ".join(str(m.get("content")) for m in incoming)
            return _text_turn(f"Done. This is what I got: {shown}")
        text = _readable(" ".join(str(m.get("content") or "") for m in incoming if m.get("role") == "assistant"))
        if self._turns > self.max_turns:
            return _text_turn(self.stop_reply)
        if _TRANSFER.search(text):
            return _text_turn(TRANSFER)
        if self._tools:
            call = self._tool_request(text)
            if call is not None:
                return call
        if _CONFIRM.search(text):
            return _text_turn(self.confirm_reply)
        if _DONE.search(text):
            return _text_turn(self.stop_reply)
        if _ASKS.search(text) and self._known:
            return _text_turn(self._known)
        return _text_turn("I don't have any other details. Could you please help me with my request?")


# --------------------------------------------------------------------------- replay user


class ReplayUser(ReplayTurns):
    """Replays the user turns of a recorded conversation (τ² or OpenAI form), then sends ``###STOP###``.

    ``skip`` leading messages are ignored (e.g. the task's message history).  Recorded
    user tool calls are re-executed by the environment; their recorded results are not used.
    """

    def __init__(self, messages: Sequence[Mapping[str, Any]], skip: int = 0):
        turns: list[UserTurn] = []
        for m in list(messages)[skip:]:
            if m.get("role") != "user":
                continue
            calls = m.get("tool_calls")
            if calls:
                norm = []
                for tc in calls:
                    if "function" in tc:
                        args = tc["function"].get("arguments")
                        args = json.loads(args) if isinstance(args, str) and args.strip() else (args or {})
                        norm.append({"name": tc["function"]["name"], "arguments": args})
                    else:
                        norm.append({"name": tc["name"], "arguments": dict(tc.get("arguments") or {})})
                turns.append(UserTurn(None, tuple(norm)))
            else:
                turns.append(_text_turn(m.get("content")))
        super().__init__(turns, _text_turn(STOP))


# --------------------------------------------------------------------------- LLM user


def _call_args(arguments: Any) -> dict[str, Any]:
    """A user tool call's arguments as a dict (a model's unparseable JSON is kept under ``__unparsed__``)."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if isinstance(arguments, str):
        return {"__unparsed__": arguments}
    return {}


class LLMUser:
    """tau2's LLM user simulator over any :class:`~trace_gym.llm.ChatClient` (see the module docstring)."""

    def __init__(self, client: ChatClient, *, data_dir: str | Path | None = None):
        self.client = client
        self.data_dir = data_dir
        self.system_prompt = ""
        self._history: list[dict[str, Any]] = []  # OpenAI messages from the user's side (roles flipped)
        self._tools: list[dict[str, Any]] = []
        self._rng: np.random.Generator | None = None
        self._n_calls = 0

    def reset(self, context: UserContext) -> None:
        self._tools = list(context.tools)
        self._rng = context.rng
        self._n_calls = 0
        self.system_prompt = user_system_prompt(context.task, with_tools=bool(self._tools),
                                                data_dir=context.data_dir if context.data_dir is not None else self.data_dir)
        self._history = []
        for m in context.history:
            self._absorb(m)

    def _absorb(self, m: Mapping[str, Any]) -> None:
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls") is None:
            self._history.append({"role": "user", "content": m.get("content")})
        elif role == "user":
            msg: dict[str, Any] = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                msg["tool_calls"] = [
                    {"id": tc.get("id") or f"ucall_{i}", "type": "function",
                     "function": {"name": tc["name"], "arguments": json.dumps(tc.get("arguments") or {})}}
                    for i, tc in enumerate(m["tool_calls"])
                ]
            self._history.append(msg)
        elif role == "tool" and m.get("requestor") == "user":
            self._history.append({"role": "tool", "tool_call_id": m.get("id"), "content": m.get("content")})

    def respond(self, incoming: Sequence[Mapping[str, Any]]) -> UserTurn:
        for m in incoming:
            self._absorb(m)
        messages = [{"role": "system", "content": self.system_prompt}, *self._history]
        seed = int(self._rng.integers(0, 2**31 - 1)) if self._rng is not None else None
        reply = ask_model(self.client, messages, tools=self._tools, seed=seed)
        if self._tools and not reply.tool_calls:
            reply = ChatReply.from_text(reply.content, self._tools)  # servers without a tool-call parser
        if self._tools and reply.tool_calls:
            turn = UserTurn(None, tuple({"id": f"user_call_{self._n_calls + i}", "name": c["name"],
                                         "arguments": _call_args(c.get("arguments"))}
                                        for i, c in enumerate(reply.tool_calls)))
            self._n_calls += len(reply.tool_calls)
        else:
            turn = _text_turn(reply.content or "")
        self._absorb(turn)
        return turn


def make_user(spec: Any, *, data_dir: str | Path | None = None) -> UserSimulator:
    """A simulator from a spec: an instance, ``"offline"``, ``"llm"`` or ``{"kind": "offline"|"llm"|"replay", ...}``.

    ``{"kind": "llm", "model": ..., "base_url": ..., "api_key": ..., ...}`` builds an LLM user
    over :class:`~trace_gym.llm.OpenAIChatClient` (the other keys are its options;
    ``model`` defaults to tau2's ``gpt-4.1-2025-04-14``, ``temperature`` to 0);
    ``{"kind": "replay", "messages": [...], "skip": n}`` a :class:`ReplayUser`.
    """
    if spec is None or spec == "offline":
        return OfflineUser()
    if spec == "llm":
        return LLMUser(_http_client(), data_dir=data_dir)
    if isinstance(spec, UserSimulator):
        return spec
    if callable(spec):
        return make_user(spec(), data_dir=data_dir)
    if isinstance(spec, Mapping):
        kind = spec.get("kind", "offline")
        opts = {k: v for k, v in spec.items() if k != "kind"}
        if kind == "offline":
            return OfflineUser(**opts)
        if kind == "llm":
            return LLMUser(_http_client(**opts), data_dir=data_dir)
        if kind == "replay":
            return ReplayUser(opts.get("messages") or [], int(opts.get("skip", 0)))
        raise ValueError(f"unknown user kind {kind!r}; expected 'offline', 'llm' or 'replay'")
    raise ValueError(f"cannot build a user simulator from {spec!r}")


def _http_client(model: str = "gpt-4.1-2025-04-14", base_url: str | None = None, **options: Any) -> ChatClient:
    from trace_gym.llm import OpenAIChatClient

    options.setdefault("temperature", 0.0)
    return OpenAIChatClient(base_url, model, **options)
