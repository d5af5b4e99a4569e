"""A deterministic ToolSandbox user that needs no model: it plays the scenario's user side from its data.

Upstream's user is an LLM given the scenario's *task* (``user_simulator_task``, the user's
knowledge boundary) under a fixed set of rules: answer the agent's questions with only
the information the task gives, let the agent fix settings, say what you still want
when the agent could not do it, and end the conversation once the task is done (or
after a few failed tries).  :class:`OfflineUser` follows the same rules with fixed text
rules instead of a model, so a multi-user-turn scenario can be played offline and an
agent can recover from a first mistake.

What it knows is read from the task text only:

* the **request** — the task with the user's point of view restored ("your (User A's)
  boss" → "my boss"), split into steps where the task asks for something after
  something else ("…, then …", "After User B did so, …");
* the **facts** it may tell — phone numbers, dates and times, the text of a message or a
  reminder, a place ("at Whole Foods on McKinley Ave"), names and relationships;
* the **secrets** it must not tell — a sentence followed by "Do not leak this
  information" (the expected answer) is dropped before anything else is read.

Each agent message to the user gets one answer, first rule that applies (of a message longer
than twice :data:`READ_CHARS`, only the first and last :data:`READ_CHARS` characters are read):

1. after ``max_turns`` user turns: end the conversation;
2. the agent asks to confirm or for permission ("Shall I…", "Does this look good?", no
   "what/which/who/when/where/how" in it):
   "Yes, please go ahead." — unless the message names a phone number the user knows to be
   another one, which it corrects;
3. the agent asks for information: the known facts of the kinds it asks for (phone number,
   name, message text, time, place, relationship); when it knows none of them, "I don't
   know" followed by the request step the agent has not heard yet, if any (a question it
   cannot classify gets the opening request once); never a made-up value;
4. the agent answered, finished or gave up: a step whose facts the agent has not heard yet
   is said now ("Who did I talk to last?" → "Bart" → "Update the phone number of the last
   person I sent a message to to +1…"), then the next step of the request; with nothing
   left the user ends the conversation.  After ``max_nudges`` answers that say the agent
   cannot do it, the user ends too (a refusal with nothing left to tell ends at once).

The same bus gives the same answer: the user keeps only counters that :meth:`reset` clears.
Its scores are not comparable with LLM-user scores.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trace_gym.core.users import UserTurn

__all__ = ["OfflineUser", "UserKnowledge", "read_task"]

_END = UserTurn(end=True)

_PHONE = re.compile(r"\+\d{6,15}")
_DATETIME = re.compile(
    r"\b\d{1,2}/\d{1,2}/\d{2,4}(?:\s*(?:at\s*)?\d{1,2}(?::\d\d)?\s*[AaPp][Mm])?"
    r"|\b(?:today|tomorrow|yesterday|(?:next|this) (?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"(?:\s*(?:at\s*)?\d{1,2}(?::\d\d)?\s*[AaPp][Mm])?",
    re.IGNORECASE,
)
_SAYING = re.compile(r"\bsaying:?\s*\"?(.+?)\"?(?:\.\s+(?:You|Make|Do)\b|\.?\s*$)")
_REMINDER_TEXT = re.compile(
    r"\breminder to (?!(?:\d|today|tomorrow|next|this)\b)(.+?)(?=\s+(?:\d|today|tomorrow|next|this|at)\b|[.,]|$)", re.IGNORECASE)
_PLACE = re.compile(r"\bat ((?:[A-Z][\w'&-]*\s?)+(?:on (?:[A-Z][\w'.-]*\s?)+)?)")
_NAME = re.compile(r"\b[A-Z][A-Za-z'-]*(?:[ ]+[A-Z][A-Za-z'-]*)+")
_RELATION = re.compile(r"\b(friends?|enem(?:y|ies)|boss|family|colleagues?|coworkers?|mother|father|sister|brother)\b",
                       re.IGNORECASE)
_VERBS = frozenset({"Ask", "Search", "Find", "Send", "Update", "Delete", "Remove", "Turn", "Add", "Convert", "Get",
                    "Check", "Please", "What", "What's", "Who", "How", "When", "Where", "Make", "After", "Then", "Do",
                    "You", "It", "Christmas"})
_FIRST_PERSON = [
    (r"\bAsk User B (?:to )?", ""), (r"\bask User B (?:to )?", ""),
    (r"\byour \(User A'?s\)", "my"), (r"\(User A'?s\)", "my"), (r"\byou \(User A\) are\b", "I am"),
    (r"\b(asked|told|sent|called|texted|messaged) you \(User A\)", r"\1 me"), (r"\byou \(User A\)", "I"), (r"\byou are\b", "I am"), (r"\byour\b", "my"), (r"\byou\b", "I"),
    (r"\bUser B\b", "you"), (r",? but be implicit", ""), (r",? in an implicit manner", ""),
    (r"\s+", " "),
]
_VERB_START = r"(Ask|Search|Find|Send|Update|Delete|Add|Turn|Convert|Remove|Create|Postpone|Check|Get)\b"
_STEP_SPLIT = re.compile(r",\s*then\s+|\.?\s*After (?:User B|you) did so,\s*", re.IGNORECASE)

# What the agent's message asks for, by kind of fact.
_ASKS = {
    "phone": ("phone", "number"),
    "name": ("name", "who ", "whom", "which contact", "which person", "recipient", "contact"),
    "content": ("content", "what should", "what would you like", "what do you want", "say", "text", "message",
                "what to", "remind you", "reminder for", "what is the reminder"),
    "datetime": ("when", "time", "date", "what day", "which day"),
    "place": ("where", "location", "which whole foods", "which store", "address", "which one", "place"),
    "relationship": ("relationship", "relation"),
}
_CONFIRM = ("confirm", "does this look", "does that look", "is that correct", "is this correct", "is that right",
            "is this right", "shall i", "should i", "do you want me to", "would you like me to", "may i", "can i go",
            "okay to", "ok to", "go ahead", "proceed", "allow me", "mind if i", "permission")
_DONE = ("anything else", "something else", "does that help", "does this help", "else i can", "else can i")
# Of a very long agent message the user reads the first and last READ_CHARS characters: what it asks
# or says is at its start or end, and the rules then cost the same for a message of any length.
READ_CHARS = 4000
_CANNOT = ("can't", "cannot", "can not", "unable", "not able", "couldn't", "could not", "sorry", "failed", "error",
           "not possible", "don't have access", "do not have access", "no tool", "not available", "isn't available")


@dataclass(frozen=True)
class UserKnowledge:
    """What the user wants (``steps``, first person) and may tell (``facts`` by kind)."""

    steps: tuple[str, ...]
    facts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def step_facts(self, step: str) -> list[str]:
        return [f for values in self.facts.values() for f in values if f.lower() in step.lower()]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s*(?=[A-Z])", text.strip()) if s.strip()]


def _first_person(text: str) -> str:
    for pattern, repl in _FIRST_PERSON:
        text = re.sub(pattern, repl, text)
    text = text.strip(" ,")
    return text[:1].upper() + text[1:] if text else text


def _names(text: str) -> list[str]:
    out = []
    for m in _NAME.finditer(text):
        words = [w.removesuffix("'s") for w in m.group(0).split()]
        while words and words[0] in _VERBS:
            words = words[1:]
        while words and words[-1] in _VERBS:
            words = words[:-1]
        if len(words) >= 2 and not any(w in ("User", "A", "B") for w in words):
            out.append(" ".join(words).rstrip("."))
    return out


def read_task(task: str) -> UserKnowledge:
    """The request steps and the tellable facts of a scenario's ``user_simulator_task``."""
    kept: list[str] = []
    for s in _sentences(task):
        if re.search(r"\bdo not leak\b", s, re.IGNORECASE):
            if kept and not re.match(_VERB_START, kept[-1]):
                kept.pop()  # "It should be X." / "Christmas Day is 12/25/2025." is the secret answer
            continue
        kept.append(s)
    request, known = [], []
    for s in kept:
        if re.match(r"(You|Make sure)\b", s):
            known.append(s)
        elif re.match(r"It should\b", s):
            continue  # a secret whose "Do not leak" sentence was malformed: keep it secret anyway
        else:
            request.append(s)
    text = " ".join(request)
    steps = [_first_person(p).rstrip(".") + "." for p in _STEP_SPLIT.split(text) if p.strip(" .")]
    steps = steps[:1] + [s if re.match(_VERB_START, s) else f"And {s[:1].lower()}{s[1:-1]}?" for s in steps[1:]]
    allowed = " ".join([text, *known])
    facts: dict[str, tuple[str, ...]] = {}

    def add(kind: str, values: Sequence[str]) -> None:
        vals = tuple(dict.fromkeys(v.strip().rstrip(".") for v in values if v and v.strip()))
        if vals:
            facts[kind] = vals

    add("phone", _PHONE.findall(allowed))
    add("datetime", [m.group(0) for m in _DATETIME.finditer(text)])
    add("content", [*(m.group(1) for m in _SAYING.finditer(text)), *(m.group(1) for m in _REMINDER_TEXT.finditer(text))])
    places = [m.group(1).strip() for m in _PLACE.finditer(text)]
    add("place", places)
    add("name", [n for n in _names(allowed) if not any(n in p for p in places)
                 and not any(n in c for c in facts.get("content", ()))])
    add("relationship", [_first_person(m.group(0)).lower() for m in _RELATION.finditer(text)])
    return UserKnowledge(steps=tuple(steps) or (_first_person(task),), facts=facts)


def _has(text: str, phrases: Sequence[str]) -> bool:
    return any(p in text for p in phrases)


class OfflineUser:
    """A rule-following, model-free ToolSandbox user (see the module docstring for the rules).

    ``max_turns`` bounds the user's messages in an episode (the first scripted message
    not counted); ``max_nudges`` how often it answers "I can't" with what it still wants;
    ``max_unknown`` how many questions it answers with "I don't know" before it ends.
    """

    def __init__(self, max_turns: int = 8, max_nudges: int = 2, max_unknown: int = 2):
        self.max_turns, self.max_nudges, self.max_unknown = max_turns, max_nudges, max_unknown
        self.scenario: Any = None
        self.knowledge: UserKnowledge | None = None
        self._turns = self._nudges = self._unknown = 0
        self._said: list[str] = []

    def reset(self, scenario: Any, seed: int | None = None) -> None:
        task = getattr(scenario, "user_simulator_task", None)
        if not isinstance(task, str):
            raise ValueError("OfflineUser needs a ToolSandbox scenario (with a user_simulator_task)")
        self.scenario = scenario
        self.knowledge = read_task(task)
        self._turns = self._nudges = self._unknown = 0
        self._said = []

    # ------------------------------------------------------------------ reading the bus
    def _conversation(self, bus: Sequence[Mapping[str, Any]]) -> tuple[list[str], str]:
        first = getattr(self.scenario, "first_user_sandbox_message_index", 0)
        heard = [str(r.get("content") or "") for r in bus[first:]
                 if r.get("sender") == "USER" and r.get("recipient") == "AGENT"]
        last = next((str(r.get("content") or "") for r in reversed(bus)
                     if r.get("sender") == "AGENT" and r.get("recipient") == "USER"), "")
        return heard, last

    def _pending_step(self, heard: Sequence[str]) -> str | None:
        """The first step not said yet whose facts the agent has not all heard (or, with no facts, not said)."""
        assert self.knowledge is not None
        told = " ".join(heard).lower()
        for i, step in enumerate(self.knowledge.steps):
            if step in self._said:
                continue
            facts = self.knowledge.step_facts(step)
            if i == 0 and (not facts or all(f.lower() in told for f in facts)):
                continue  # the opening message asked for it
            return step
        return None

    def _answer(self, kinds: list[str], agent: str) -> str | None:
        assert self.knowledge is not None
        parts = []
        for kind in kinds:
            values = self.knowledge.facts.get(kind, ())
            if values:
                parts.append(" and ".join(values))
        if not parts and "name" in kinds and self.knowledge.facts.get("phone"):
            parts.append(" and ".join(self.knowledge.facts["phone"]))  # the contact, by the number the user knows
        return (", ".join(parts) + ".") if parts else None

    def _say(self, text: str, step: str | None = None) -> UserTurn:
        self._turns += 1
        if step is not None:
            self._said.append(step)
        return UserTurn(text)

    # ------------------------------------------------------------------ the rules
    def respond(self, bus: Sequence[Mapping[str, Any]]) -> UserTurn:
        if self.knowledge is None:
            raise ValueError("OfflineUser.respond() before reset()")
        if self._turns >= self.max_turns:
            return _END
        heard, agent = self._conversation(bus)
        if len(agent) > 2 * READ_CHARS:
            agent = f"{agent[:READ_CHARS]}\n\n{agent[-READ_CHARS:]}"
        text = agent.lower()
        asks = "?" in agent or _has(text, ("please provide", "please specify", "let me know", "please tell",
                                             "could you tell", "can you tell", "i need your", "please share"))
        if asks and _has(text, _DONE):
            step = self._pending_step(heard)
            return self._say(step, step) if step else _END
        phones = set(self.knowledge.facts.get("phone", ()))
        kinds = [k for k, words in _ASKS.items() if _has(text, words)]
        wh = re.search(r"\b(what|which|who|whom|when|where|how)\b", text) is not None
        if asks and _has(text, _CONFIRM) and not wh:
            wrong = [p for p in _PHONE.findall(agent) if phones and p not in phones]
            if wrong:
                return self._say(f"No, the number is {' and '.join(sorted(phones))}.")
            return self._say("Yes, please go ahead.")
        if asks:
            reply = self._answer(kinds, agent) if kinds else None
            if reply is not None:
                return self._say(reply)
            step = self._pending_step(heard)
            if step is None and not kinds:  # "How can I help?": say what the user wants
                step = next((s for s in self.knowledge.steps[:1] if s not in self._said), None)
            if step is not None:
                return self._say(("I don't know that. " if kinds else "") + step, step)
            self._unknown += 1
            if self._unknown > self.max_unknown:
                return _END
            return self._say("I don't know, I don't have more information. Can you use your tools to find out?")
        step = self._pending_step(heard)
        if _has(text, _CANNOT):
            if step is None or self._nudges >= self.max_nudges:
                return _END  # nothing more to tell: the agent's answer stands
            self._nudges += 1
        if step is not None:
            return self._say(step, step)
        return _END
