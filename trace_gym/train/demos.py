"""Demonstrations for a supervised warm start: reference episodes, rendered and masked.

A demonstration is one whole episode of an environment played by its reference
solution: the env is reset on a task of its task source's ``train`` split (so
demonstrations never come from the evaluation split), each action of the unwrapped
env's ``reference_actions()`` is stepped in order, and the conversation the env
reports in ``info["messages"]`` is kept when the episode ended with a successful
reward.  Its assistant turns are exactly the reference's tool calls and its messages
to the user, the last of them the message that closes the episode.

A *recovered* demonstration (``recover_every``) shows what to do after a tool error: the
reference's last tool call is tried first, out of order; when the env answers it with an
error (and, as every env's contract says, changes nothing), the reference then plays in
full and the episode must still succeed.  The mistaken turn stays in the conversation as
context but is not trained on (:attr:`Demonstration.untrained`); the turns after it teach
the repair, the retried call and the closing message.  A task where the early call does
not fail, or the episode then fails, gives its plain demonstration instead.

:func:`tokenize_demonstration` renders an episode with the model's chat template, as
:class:`~trace_gym.policies.hf.HFPolicy` renders its prompts (same tool listing, same
call format), and marks the tokens the model is trained on: the assistant turns and
the end-of-turn token that closes each of them, nothing of the system prompt, the user
or the tool results.  Each piece is tokenized on its own, as the model produces an
assistant turn after a tokenized prompt.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..episode import Episode
from .chat import ChatRenderer

__all__ = ["Demonstration", "DemoReport", "NoReferenceError", "build_demonstrations", "reference_episode",
           "episode_demonstration", "repeated_call", "tokenize_demonstration", "TRAIN_SPLIT"]

TRAIN_SPLIT = "train"


class NoReferenceError(TypeError):
    """The environment has no reference solution (no ``reference_actions()``) or no train split to draw from."""


@dataclass
class Demonstration:
    """One reference episode: the conversation in OpenAI chat format (system message first) and the tools."""

    env_id: str
    task_id: str
    seed: int
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    reward: float
    untrained: tuple[int, ...] = ()  # indices of assistant messages kept as context only (a recovered mistake)

    def assistant_turns(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("role") == "assistant"]

    def to_dict(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "task_id": self.task_id, "seed": self.seed, "messages": self.messages,
                "tools": self.tools, "reward": self.reward, "untrained": list(self.untrained)}


@dataclass
class DemoReport:
    """What :func:`build_demonstrations` played: kept demonstrations and the episodes left out, per env."""

    demos: list[Demonstration] = field(default_factory=list)
    played: dict[str, int] = field(default_factory=dict)
    recovered: dict[str, int] = field(default_factory=dict)  # env id -> recovered demonstrations among ``demos``
    skipped: dict[str, list[str]] = field(default_factory=dict)  # env id -> "task: reason"


def _check_reference(env: Any, env_id: str) -> Any:
    """The unwrapped env's ``reference_actions`` method, or :class:`NoReferenceError`."""
    get = getattr(getattr(env, "unwrapped", env), "reference_actions", None)
    if not callable(get):
        raise NoReferenceError(f"{env_id} has no reference solution (its env offers no reference_actions()); "
                               "demonstrations come from envs that do, such as the capability envs (trace/cap-*)")
    return get


def reference_episode(env: Any, task_id: str, *, env_id: str = "", seed: int = 0,
                      recover: bool = False) -> tuple[Demonstration | None, str]:
    """Play task ``task_id`` of ``env`` with its reference solution (``recover``: the recovered variant, see
    the module docstring).

    Returns ``(demonstration, "")``, or ``(None, reason)`` when the episode did not end
    within the reference or ended below the env's success threshold (or, with ``recover``,
    when the out-of-order call did not fail).
    """
    from ..core.outcome import is_success, success_threshold

    ep = Episode(env, "reference", seed, _reset_options(env, task_id))
    ep.start()
    tools = list(ep.tools or [])
    actions = list(_check_reference(env, env_id)())
    first_error = False
    if recover:
        calls = _tool_call_steps(actions)
        if not calls:
            return None, "the reference makes no tool call to try early"
        actions = [actions[calls[-1]], *actions]
    reward, ended = 0.0, False
    for i, action in enumerate(actions):
        _, reward, terminated, truncated, info = ep.apply(action)
        if i == 0:
            first_error = bool(info.get("tool_errors"))
        if terminated or truncated:
            ended = i == len(actions) - 1 or not recover
            break
    if recover and not first_error:
        return None, "the reference's last call, tried first, did not fail"
    if not ended:
        return None, "the episode was still open after the last reference action"
    if not is_success(float(reward), success_threshold(env)):
        return None, f"the reference scored {reward}"
    messages = [dict(m) for m in ep.messages]
    while messages and messages[-1].get("role") != "assistant":  # what follows the last turn is never a target
        messages.pop()
    if not any(m.get("role") == "assistant" for m in messages):
        return None, "the episode has no assistant turn"
    untrained = (next(i for i, m in enumerate(messages) if m.get("role") == "assistant"),) if recover else ()
    return Demonstration(env_id, str(task_id), int(seed), messages, tools, float(reward), untrained), ""


def episode_demonstration(trajectory: Any) -> tuple[Demonstration | None, str]:
    """A played episode (a :class:`~trace_gym.trajectory.Trajectory`, e.g. of a rollout store) as a
    demonstration: its ``messages`` and ``tools`` as the policy saw them, up to its last assistant turn.

    An action the env rejected (``action_errors``) stays in the conversation as context and is not
    trained on (:attr:`Demonstration.untrained`).  Returns ``(demonstration, "")``, or ``(None, reason)``
    when the episode has no assistant turn, or rejected actions whose turns cannot be told apart (its
    assistant messages do not match its actions one to one).  Whether the episode is worth learning
    from (its reward) is the caller's question.
    """
    messages = [dict(m) for m in trajectory.messages or []]
    while messages and messages[-1].get("role") != "assistant":  # what follows the last turn is never a target
        messages.pop()
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if not turns:
        return None, "no assistant turn"
    untrained: tuple[int, ...] = ()
    if trajectory.action_errors:
        if len(turns) != len(trajectory.actions):
            return None, (f"{len(trajectory.action_errors)} rejected action(s), and its {len(turns)} assistant turns do "
                          f"not match its {len(trajectory.actions)} actions one to one")
        untrained = tuple(turns[i] for i in trajectory.action_errors if i < len(turns))
    task = ",".join(str(v) for v in (trajectory.options or {}).values()) or f"seed-{trajectory.seed}"
    return Demonstration(trajectory.env_id, task, int(trajectory.seed), messages, list(trajectory.tools or []),
                         float(trajectory.reward), untrained), ""


def repeated_call(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The first tool call an assistant turn of ``messages`` makes again with the same name and arguments, as
    ``name(arguments)``, or ``None``.  An episode that repeats a call teaches calling again instead of answering."""
    import json

    seen: set[tuple[str, str]] = set()
    for m in messages:
        if m.get("role") != "assistant":
            continue
        for call in m.get("tool_calls") or []:
            fn = call.get("function", call) if isinstance(call, Mapping) else {}
            args = fn.get("arguments", {})
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
            key = (str(fn.get("name")), json.dumps(args, sort_keys=True, default=str))
            if key in seen:
                return f"{key[0]}({key[1]})"
            seen.add(key)
    return None


def _reset_options(env: Any, task_id: str) -> dict[str, Any]:
    from ..core.tasks import task_source

    options = dict(task_source(env).reset_options(task_id))
    if "hint" in getattr(getattr(env, "unwrapped", env), "reset_option_keys", ()):
        options["hint"] = False  # evaluation prompts carry no hint
    return options


def _tool_call_steps(actions: list[Any]) -> list[int]:
    """Indices of the reference actions that are tool calls (parsed as the env parses a text action)."""
    from ..core.toolcalls import parse_action

    return [i for i, a in enumerate(actions) if isinstance(a, str) and parse_action(a).is_call]


def build_demonstrations(
    env_ids: Sequence[str],
    per_env: int,
    *,
    start: int = 0,
    env_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    seed: int = 0,
    factories: Mapping[str, Callable[[], Any]] | None = None,
    recover_every: int = 0,
) -> DemoReport:
    """Reference episodes of ``per_env`` train-split tasks (from index ``start``) of each env in ``env_ids``.

    ``env_kwargs`` maps an env id to its ``gym.make`` keyword arguments; ``factories`` maps an
    env id to a function that makes the env instead (an unregistered synthesized env, or one
    wrapped to charge a rollout budget per episode).  An env without a reference solution, a
    task source or a ``train`` split raises :class:`NoReferenceError`.  ``recover_every`` = k > 0:
    every k-th task (the first, the (k+1)-th, …) is played as a recovered demonstration where the
    env allows one (see the module docstring), else as a plain one.
    """
    import gymnasium as gym

    import trace_gym  # noqa: F401  (registers the trace/* ids)

    from ..core.tasks import TaskError, task_source

    report = DemoReport()
    for env_id in env_ids:
        make = (factories or {}).get(env_id)
        env = make() if make is not None else gym.make(env_id, disable_env_checker=True,
                                                       **dict((env_kwargs or {}).get(env_id) or {}))
        try:
            _check_reference(env, env_id)
            try:
                src = task_source(env)
                ids = src.task_ids(TRAIN_SPLIT)
            except TaskError as exc:
                raise NoReferenceError(f"{env_id}: demonstrations come from a task source's {TRAIN_SPLIT!r} split, "
                                       f"held out from evaluation: {exc}") from None
            chosen = ids[start:start + per_env]
            report.played[env_id] = len(chosen)
            for n, tid in enumerate(chosen):
                demo = None
                if recover_every > 0 and n % recover_every == 0:
                    demo, _ = reference_episode(env, tid, env_id=env_id, seed=seed, recover=True)
                    if demo is not None:
                        report.recovered[env_id] = report.recovered.get(env_id, 0) + 1
                if demo is None:
                    demo, reason = reference_episode(env, tid, env_id=env_id, seed=seed)
                if demo is None:
                    report.skipped.setdefault(env_id, []).append(f"{tid}: {reason}")
                else:
                    report.demos.append(demo)
        finally:
            env.close()
    return report


def tokenize_demonstration(renderer: ChatRenderer, demo: Demonstration, max_length: int | None = None) -> dict[str, Any]:
    """``{"input_ids", "assistant_masks"}`` for one demonstration (see the module docstring).

    The ids decode to the chat template's rendering of the whole conversation.  A
    sequence longer than ``max_length`` tokens is cut there (its later turns are not
    trained on).  A template that does not render a conversation as the concatenation
    of its turns raises :class:`ValueError`.
    """
    messages, tools = demo.messages, demo.tools
    eos = getattr(renderer.tokenizer, "eos_token", None)
    eot = renderer.end_of_turn()
    # the part of the end-of-turn text the model writes itself: up to its stop token
    target_eot = eot[: eot.index(eos) + len(eos)] if eos and eos in eot else eot
    pieces: list[tuple[str, bool]] = []
    done = ""
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        before = renderer.render(messages[:i], tools, generation_prompt=True)
        through = renderer.render(messages[: i + 1], tools, generation_prompt=False)
        if not before.startswith(done) or not through.startswith(before):
            raise ValueError("the chat template does not render a conversation as the concatenation of its turns; "
                             "demonstrations cannot be masked turn by turn with it")
        turn = through[len(before):]
        cut = turn.rfind(target_eot)
        target = turn[: cut + len(target_eot)] if cut >= 0 else turn
        pieces.append((before[len(done):], False))
        pieces.append((target, i not in demo.untrained))
        done = before + target
    full = renderer.render(messages, tools, generation_prompt=False)
    if not full.startswith(done):
        raise ValueError("the chat template renders the whole conversation differently from its turns")
    if full[len(done):]:
        pieces.append((full[len(done):], False))
    ids: list[int] = []
    mask: list[int] = []
    for text, trained in pieces:
        piece = renderer.encode(text) if text else []
        ids.extend(piece)
        mask.extend([int(trained)] * len(piece))
    if max_length is not None and len(ids) > max_length:
        ids, mask = ids[:max_length], mask[:max_length]
    return {"input_ids": ids, "assistant_masks": mask}


def demo_token_count(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Total and trained tokens of tokenized demonstrations."""
    total = sum(len(r["input_ids"]) for r in rows)
    trained = sum(sum(r["assistant_masks"]) for r in rows)
    return {"tokens": total, "trained_tokens": trained, "sequences": len(rows),
            "mean_tokens": math.ceil(total / len(rows)) if rows else 0}
