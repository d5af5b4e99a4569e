"""A trace-gym env in TRL's ``GRPOTrainer``: its environment mode, or a rollout function that plays whole conversations.

Environment mode
----------------

TRL's mode (``trl>=1.16``, ``transformers>=5.2``) wants a class whose public methods are
the tools, a ``reset`` that opens an episode, and a reward.  :func:`environment_factory`
builds that class for any registered id: each of the env's tools is a typed method with a
Google-style docstring (TRL and transformers read the tool schema from them), and a call
is one ``env.step`` with that call, so the env's own step loop, tool validation and state
apply unchanged::

    from trl import GRPOConfig, GRPOTrainer
    from trace_gym.integrations.trl import environment_trainer_kwargs, tool_calling_tokenizer

    tokenizer = tool_calling_tokenizer(tokenizer)  # a chat template TRL can parse tool calls from
    trainer = GRPOTrainer(model=model, args=GRPOConfig(...), processing_class=tokenizer,
                          **environment_trainer_kwargs("trace/cap-ts-canonicalization-v0", seeds=range(256)))

The three arguments: ``train_dataset`` (one row per env seed, whose ``prompt`` is that
episode's opening), ``environment_factory`` and ``reward_funcs``.  In TRL's mode a rollout
ends when the model answers without calling a tool; that answer is the agent's last
message, and the env scores it: :func:`environment_reward` delivers it to the episode and
returns the env's reward (a ``get_reward()`` without arguments could not see it).  When the
user side answers and the conversation would go on, the episode is scored as if its step
limit had been reached (:meth:`~trace_gym.core.env.ToolEnv.truncate`): TRL's mode has one
agent answer per rollout, so envs whose users reply over several turns (confirmations,
follow-up questions) are trained through ``rollout_func``
(:func:`grpo_trainer_kwargs`), which plays the whole conversation.

Rollout function
----------------
:func:`grpo_trainer_kwargs` returns the three arguments that connect an env to TRL through
``rollout_func``: a ``train_dataset`` of env seeds, a rollout function that plays G episodes
per seed through the env (tool results and user turns come from the env and are masked out
of the loss), and ``reward_funcs`` returning the env's reward::

    from trl import GRPOConfig, GRPOTrainer
    from trace_gym.integrations.trl import grpo_trainer_kwargs

    args = GRPOConfig(output_dir="runs/x", num_generations=8, per_device_train_batch_size=8,
                      max_completion_length=1024, beta=0.0, epsilon_high=0.28, loss_type="dapo", max_steps=100)
    trainer = GRPOTrainer(
        model=model, args=args, processing_class=tokenizer, peft_config=my_lora_config,
        **grpo_trainer_kwargs("trace/cap-refund-policy-v0", seeds=range(256), num_generations=8),
    )
    trainer.train()

Keep ``num_generations`` equal to the ``GRPOConfig`` value.  Everything else in
``GRPOConfig`` is yours; the rollout function samples with the trainer's own generation
settings (temperature, top-p/k) and back end (vLLM when ``use_vllm``).  To also compute
each group's shared prompt prefix once in the loss (same loss and gradients, far less
compute on long prompts), build the trainer from ``trace_gym.train.grpo_trainer_class()``
instead of ``GRPOTrainer``.
"""

from __future__ import annotations

import itertools
import keyword
from collections.abc import Callable, Iterable
from typing import Any, Literal

from ..core.env import TRUNCATED, render_messages
from ..core.toolcalls import format_tool_call
from ..episode import Episode
from ..registration import make_env_factory

__all__ = ["TraceEnvironment", "grpo_trainer_kwargs", "environment_factory", "environment_dataset", "environment_demonstrations",
           "environment_reward", "environment_tools", "environment_trainer_kwargs", "tool_calling_tokenizer",
           "tool_method", "opening_messages"]

_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict}


class TraceEnvironment:
    """One trace-gym episode at a time, for TRL's ``environment_factory``.

    Subclasses made by :func:`environment_factory` add one method per tool.  ``reset``
    opens the episode of the row's ``seed``; each tool method is one env step; the episode
    ends when the env ends it or when :meth:`_finish` delivers the agent's last message.
    Calling a tool after the episode ended raises ``RuntimeError`` (TRL shows the model the
    error).  Non-tool members start with ``_`` (TRL exposes every public method as a tool).
    """

    _env_id: str = ""
    _make_env: Callable[[], Any]
    _seeds: Iterable[int]
    _tool_names: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._env = type(self)._make_env()
        self._episode: Episode | None = None
        self._open = False
        self._reward: float | None = None
        self._seed: int | None = None

    def reset(self, seed: int | None = None, prompt: list[dict[str, Any]] | None = None, **_: Any) -> str | None:
        """Open the episode of ``seed`` (the dataset row's; else the next of the factory's seeds).

        Returns ``None`` when the row's ``prompt`` is the episode's opening (TRL renders it),
        else the opening as text, which TRL appends to the prompt.  A ``prompt`` that is
        not this episode's opening raises ``ValueError`` (a dataset built for other env settings), and
        so does an episode whose tools are not the class's.
        """
        if seed is None:
            seed = next(type(self)._seeds)
        self._episode = Episode(self._env, self._env_id or "trl", int(seed), None)
        self._episode.start()
        info = self._episode.info
        self._open, self._reward, self._seed = True, None, int(seed)
        names = tuple(t.get("function", t)["name"] for t in info.get("tools") or [])
        if names != type(self)._tool_names:
            raise ValueError(f"{self._env_id} seed {seed} has the tools {list(names)}, not the {list(type(self)._tool_names)} "
                             "the environment class was built with: TRL's mode needs one tool list per env")
        opening = opening_messages(info)
        if prompt is None:
            return render_messages(opening)
        if [(m.get("role"), m.get("content")) for m in prompt] != [(m["role"], m["content"]) for m in opening]:
            raise ValueError(f"the dataset row's prompt is not the opening of {self._env_id} seed {seed}; "
                             "build the dataset with environment_dataset() and the same env_kwargs")
        return None

    def _step(self, action: str) -> tuple[str, dict[str, Any]]:
        if not self._open or self._episode is None:
            raise RuntimeError("the episode is over: no more tool calls")
        obs, reward, terminated, truncated, info = self._episode.apply(action)
        if terminated or truncated:
            self._open, self._reward = False, float(reward)
        return obs, info

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        before = len(self._env.unwrapped.messages)
        obs, info = self._step(format_tool_call(name, arguments))
        if info.get("action_error"):
            return f"Error: {info['action_error']}"
        results = [m["content"] for m in info["messages"][before:] if m.get("role") == "tool"]
        return "\n".join(str(r) for r in results) if results else obs

    def _finish(self, message: str | None) -> float:
        """Deliver the agent's last message (``None``: it had none), end the episode, return its reward
        (an episode still open then is cut as a step-limit truncation, :meth:`trace_gym.episode.Episode.cut`)."""
        if self._open and message is not None and message.strip():
            self._step(message)
        if self._open and self._episode is not None:
            self._episode.cut(TRUNCATED)
            self._reward = self._episode.final_reward
            self._open = False
        if self._reward is None:
            raise RuntimeError("reset() was never called")
        return self._reward


def opening_messages(info: dict[str, Any]) -> list[dict[str, Any]]:
    """An episode's opening from its reset ``info``: the messages as role and content."""
    return [{"role": m["role"], "content": m.get("content") or ""} for m in info["messages"]]


def _annotation(schema: dict[str, Any]) -> Any:
    if isinstance(schema.get("enum"), list) and schema["enum"] and all(isinstance(v, str | int | float | bool) for v in schema["enum"]):
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind is None and isinstance(schema.get("anyOf"), list):
        kinds = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return _annotation(kinds[0]) if len(kinds) == 1 else str
    if kind == "array":
        items = schema.get("items")
        return list[_annotation(items)] if isinstance(items, dict) else list
    return _JSON_TYPES.get(kind, str)


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "-"


def tool_method(schema: dict[str, Any]) -> Callable[..., str]:
    """A method calling one tool, typed and documented from its OpenAI function schema.

    ``transformers.utils.get_json_schema`` of the method gives the tool's name, description,
    parameters (JSON types, enums, array item types) and required list.  Raises
    ``ValueError`` for a tool or parameter name that is not a Python identifier.
    """
    import inspect

    fn = schema.get("function", schema)
    name = fn["name"]
    params = fn.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    required = set(params.get("required") or [])
    for n in [name, *props]:
        if not n.isidentifier() or keyword.iskeyword(n) or n in ("self", "reset"):
            raise ValueError(f"tool {name!r}: {n!r} cannot be a Python method or argument name")

    def method(self: TraceEnvironment, **kwargs: Any) -> str:
        return self._call(name, {k: v for k, v in kwargs.items() if v is not None})  # None: an optional left out

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    ordered = [p for p in props if p in required] + [p for p in props if p not in required]
    for p in ordered:
        ann = _annotation(props[p])
        if p not in required:
            ann = ann | None
        annotations[p] = ann
        parameters.append(inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, annotation=ann,
                                            default=inspect.Parameter.empty if p in required else None))
    annotations["return"] = str
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    method.__name__ = method.__qualname__ = name
    args = "".join(f"\n    {p}: {_one_line(props[p].get('description') or props[p].get('title') or p)}" for p in ordered)
    method.__doc__ = (f"{_one_line(fn.get('description') or name)}\n\n" + (f"Args:{args}\n\n" if args else "")
                      + "Returns:\n    The tool's result.")
    return method


def _environment_class(env_id: str, make: Callable[[], Any], schemas: list[dict[str, Any]], seed: int,
                       suffix: str = "") -> type[TraceEnvironment]:
    names = [sc.get("function", sc)["name"] for sc in schemas]
    members: dict[str, Any] = {"_env_id": env_id, "_make_env": staticmethod(make), "_seeds": itertools.count(seed),
                               "_tool_names": tuple(names), "__doc__": f"The {env_id} env as a TRL environment."}
    for schema in schemas:
        method = tool_method(schema)
        if method.__name__ in members or hasattr(TraceEnvironment, method.__name__):
            raise ValueError(f"tool {method.__name__!r} of {env_id} clashes with a member of the environment class")
        members[method.__name__] = method
    cls_name = "".join(ch if ch.isalnum() else "_" for ch in env_id.split("/")[-1])
    return type(f"TraceEnvironment_{cls_name}{suffix}", (TraceEnvironment,), members)


def environment_factory(env_id: str, *, env_kwargs: dict[str, Any] | None = None, seed: int = 0,
                        probe_seed: int = 0) -> type[TraceEnvironment]:
    """The class TRL's ``environment_factory`` calls: one fresh env per instance, the env's tools as methods.

    The tools are read from one reset (``probe_seed``); an episode with other tools raises
    ``ValueError`` at its reset (:func:`environment_trainer_kwargs` gives such envs one class
    per tool list).  Episodes reset without a ``seed`` take the next seed from ``seed`` up.
    """
    make = make_env_factory(env_id, env_kwargs)
    probe = make()
    _, info = probe.reset(seed=probe_seed)
    probe.close()
    return _environment_class(env_id, make, list(info.get("tools") or []), seed)


def _openings(env_id: str, seeds: list[int], env_kwargs: dict[str, Any] | None) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """Per seed: the episode's opening messages and its tools."""
    env = make_env_factory(env_id, env_kwargs)()
    out = []
    for s in seeds:
        _, info = env.reset(seed=int(s))
        out.append((opening_messages(info), list(info.get("tools") or [])))
    env.close()
    if not out:
        raise ValueError("seeds is empty")
    return out


def environment_dataset(env_id: str, seeds: Iterable[int], *, env_kwargs: dict[str, Any] | None = None):
    """A ``datasets.Dataset``: per seed, the episode's opening as ``prompt`` and the ``seed``."""
    from datasets import Dataset

    seed_list = [int(s) for s in seeds]
    return Dataset.from_dict({"prompt": [o for o, _ in _openings(env_id, seed_list, env_kwargs)], "seed": seed_list})


def _final_message(completion: Any) -> str | None:
    """The agent's last message of a TRL completion, ``None`` when it ended on tool calls or results."""
    if isinstance(completion, str):
        return completion
    if not completion:
        return None
    last = completion[-1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return None
    content = last.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def environment_reward(completions: list[Any], environments: list[TraceEnvironment] | None = None,
                       log_extra: Callable[[str, list[Any]], None] | None = None, **_: Any) -> list[float]:
    """TRL reward function: each rollout's env reward, after its last message reached the env.

    Each rollout's env seed goes to TRL's completions table (column ``env_seed``).
    """
    if environments is None:
        raise ValueError("environment_reward needs GRPOTrainer(environment_factory=...) (TRL passes `environments`)")
    rewards = [env._finish(_final_message(c)) for c, env in zip(completions, environments, strict=True)]
    if log_extra is not None:
        log_extra("env_seed", [env._seed for env in environments])
    return rewards


environment_reward.__name__ = "env_reward"


def environment_trainer_kwargs(env_id: str, *, seeds: Iterable[int], env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """``train_dataset``, ``environment_factory`` and ``reward_funcs`` for ``trl.GRPOTrainer``.

    An env whose episodes offer different tools (ToolSandbox scenarios) gets one environment
    class per tool list, as TRL's dict form (``{name: class}``, each row's ``environment``
    naming its class), so every prompt shows exactly its episode's tools.
    """
    from datasets import Dataset

    seed_list = [int(s) for s in seeds]
    openings = _openings(env_id, seed_list, env_kwargs)
    make = make_env_factory(env_id, env_kwargs)
    groups: dict[tuple[str, ...], str] = {}
    classes: dict[str, type[TraceEnvironment]] = {}
    names = []
    for s, (_, tools) in zip(seed_list, openings, strict=True):
        key = tuple(t.get("function", t)["name"] for t in tools)
        if key not in groups:
            groups[key] = f"tools{len(groups)}"
            classes[groups[key]] = _environment_class(env_id, make, tools, s, suffix=f"_{groups[key]}")
        names.append(groups[key])
    data: dict[str, list[Any]] = {"prompt": [o for o, _ in openings], "seed": seed_list}
    if len(classes) == 1:
        factory: Any = next(iter(classes.values()))
    else:
        factory, data["environment"] = classes, names
    return {"train_dataset": Dataset.from_dict(data), "environment_factory": factory, "reward_funcs": [environment_reward]}


def environment_tools(environment: type[TraceEnvironment]) -> list[dict[str, Any]]:
    """The tool schemas TRL shows the model for ``environment``: what ``transformers`` reads from each
    public method (TRL passes the bound methods as ``tools=``), in TRL's order (by name)."""
    import inspect

    from transformers.utils import get_json_schema

    unbound = environment.__new__(environment)  # only to bind the methods: no env is made
    return [get_json_schema(getattr(unbound, name)) for name, _ in inspect.getmembers(environment, predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def environment_demonstrations(env_id: str, per_env: int, *, env_kwargs: dict[str, Any] | None = None, start: int = 0,
                               seed: int = 0, recover_every: int = 0) -> list[Any]:
    """Reference episodes of ``env_id`` for a supervised warm start before TRL's environment mode.

    The episodes of :func:`trace_gym.train.demos.build_demonstrations` (``per_env`` tasks of
    the env's train split from ``start``), each with its tools replaced by the schemas TRL
    renders for the environment class of that tool list (:func:`environment_tools`), so that
    :func:`trace_gym.train.sft.warm_start` with a :func:`tool_calling_tokenizer` trains on
    exactly the prompts the trainer later shows.  An episode with more than one agent turn
    between user messages after the first (a user who replies) is left out: TRL's mode plays
    one answer per rollout.  Raises ``ValueError`` when no episode is left.
    """
    import dataclasses

    from ..train.demos import build_demonstrations
    make = make_env_factory(env_id, env_kwargs)
    report = build_demonstrations([env_id], per_env, start=start, seed=seed, recover_every=recover_every,
                                  factories={env_id: make})
    schemas: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    out = []
    for demo in report.demos:
        if sum(m.get("role") == "user" for m in demo.messages) > 1:
            continue
        key = tuple(t.get("function", t)["name"] for t in demo.tools)
        if key not in schemas:
            schemas[key] = environment_tools(_environment_class(env_id, make, demo.tools, 0))
        out.append(dataclasses.replace(demo, tools=schemas[key]))
    if not out:
        raise ValueError(f"no single-request reference episode of {env_id} among {per_env} train tasks "
                         f"(skipped: {report.skipped})")
    return out


def tool_calling_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer`` with a chat template TRL can render tools with and parse tool calls from.

    A template TRL already knows is kept (its response parser added).  A ChatML template
    TRL does not know (SmolLM2's) is replaced by TRL's Qwen2.5 template, which writes
    tools and ``<tool_call>`` JSON blocks with the same ``<|im_start|>``/``<|im_end|>``
    tokens.  Anything else raises ``ValueError``.  Returns the same tokenizer object.
    """
    from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template

    try:
        return add_response_schema(tokenizer)
    except ValueError:
        pass
    vocab = tokenizer.get_vocab()
    if "<|im_start|>" not in vocab or "<|im_end|>" not in vocab:
        raise ValueError("the tokenizer's chat template is not one TRL parses tool calls from, and it is not ChatML: "
                         "set tokenizer.chat_template and tokenizer.response_template yourself")
    tokenizer.chat_template = qwen2_5_chat_template
    return add_response_schema(tokenizer)


def grpo_trainer_kwargs(env: str | Callable[[], Any], *, seeds: Iterable[int], num_generations: int,
                        env_kwargs: dict[str, Any] | None = None, generate: Any = None, sampler: Any = None,
                        **rollout_options: Any) -> dict[str, Any]:
    """``train_dataset``, ``rollout_func`` and ``reward_funcs`` for ``trl.GRPOTrainer`` on a trace-gym env.

    ``env`` is a registered env id or a factory returning a fresh env.
    ``rollout_options`` are :class:`~trace_gym.train.config.TrainConfig` fields the
    :class:`~trace_gym.train.rollout_func.EnvRolloutFunc` reads (``hint_fraction``, ``max_resamples``,
    ``max_new_tokens_per_turn``, ``max_completion_length`` (keep it equal to ``GRPOConfig``'s), ``max_turns``,
    ``shared_prefix``, ...; an unknown or invalid one is a :class:`~trace_gym.train.config.ConfigError`);
    ``generate`` or ``sampler`` replace its sampler (see that class).
    """
    from ..train.config import TrainConfig
    from ..train.rollout_func import EnvRolloutFunc, env_reward, seed_dataset

    config = TrainConfig().with_overrides(num_generations=num_generations, **rollout_options).validate()
    factory = make_env_factory(env, env_kwargs) if isinstance(env, str) else env
    return {
        "train_dataset": seed_dataset(list(seeds)),
        "rollout_func": EnvRolloutFunc(factory, config, generate=generate, sampler=sampler),
        "reward_funcs": [env_reward],
    }
