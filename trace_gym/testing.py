"""A property-testing kit for trace-gym environments.

* Hypothesis strategies: :func:`text_actions` (any text an agent might send, well formed
  or not), :func:`tool_call_actions` (calls drawn from an environment's own tool
  schemas, valid or subtly wrong, in every call syntax), :func:`hostile_actions` (the
  shapes that attack a parser: deep nesting, repeated tags, huge strings — see
  :data:`HOSTILE_SHAPES`), :func:`episodes` (a seed and a list of actions).
  Hypothesis (the ``testing`` extra: ``pip install 'trace-gym[testing]'``) is imported
  only when a strategy is built; without it building one raises an ImportError saying so.
* :func:`hostile_action` — one action of a named hostile shape and size, and
  :func:`seeded_hostile_action` — a seeded mix of those, junk-argument calls and plain
  messages, for drivers without Hypothesis (``benchmarks/fuzz.py``, the determinism test).
* :func:`check_reward` — for sampled seeds of a capability environment, checks that the
  reward is in [0, 1] and deterministic, that the spec's reference solution scores 1,
  that doing nothing, refusing an allowed task and an unauthorized write score below the
  spec's floor, and (where the spec says so) that read-only calls inserted anywhere
  leave the reward unchanged.  Failures raise :class:`RewardCheckError` naming the
  environment, the seed and the probe.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RewardCheckError", "RewardReport", "check_reward", "run_actions", "text_actions", "tool_call_actions", "episodes",
           "DO_NOTHING", "REFUSE", "HOSTILE_SHAPES", "hostile_action", "hostile_actions", "seeded_hostile_action",
           "PLAIN_MESSAGES", "JUNK_VALUES"]

DO_NOTHING = "Okay."
REFUSE = "I'm sorry, but I can't help with that request."


class RewardCheckError(AssertionError):
    """A reward property does not hold."""


@dataclass
class RewardReport:
    env_id: str
    seeds: list[int]
    cases: dict[str, int] = field(default_factory=dict)
    probes: dict[str, list[float]] = field(default_factory=dict)

    def add(self, probe: str, reward: float) -> None:
        self.probes.setdefault(probe, []).append(reward)

    def summary(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "seeds": len(self.seeds), "cases": self.cases,
                "probes": {k: {"n": len(v), "max": max(v), "mean": sum(v) / len(v)} for k, v in self.probes.items()}}


def run_actions(env: Any, seed: int, actions: list[str], options: dict[str, Any] | None = None,
                filler: str = DO_NOTHING) -> tuple[float, dict[str, Any], list[dict[str, Any]]]:
    """Reset with ``seed``, send ``actions`` then ``filler`` until the episode ends.

    Returns the final reward, the final info and the transcript.
    """
    env.reset(seed=seed, options=options)
    queue = list(actions)
    while True:
        action = queue.pop(0) if queue else filler
        _, reward, terminated, truncated, info = env.step(action)
        if not (0.0 <= reward <= 1.0):
            raise RewardCheckError(f"reward {reward} outside [0, 1]")
        if terminated or truncated:
            return reward, info, env.transcript()


def _fail(env_id: str, seed: int, probe: str, msg: str, info: dict[str, Any] | None = None) -> RewardCheckError:
    detail = f" reward_info={json.dumps((info or {}).get('reward_info'), default=str)}" if info else ""
    return RewardCheckError(f"{env_id} seed {seed}: {probe}: {msg}.{detail}")


def check_reward(env_id: str, seeds: int | list[int] = 8, *, env_kwargs: dict[str, Any] | None = None, tol: float = 1e-9) -> RewardReport:
    """Check the reward properties of a capability environment (see the module docstring)."""
    import gymnasium as gym

    import trace_gym  # noqa: F401  (registers the ids)

    env = gym.make(env_id, **(env_kwargs or {})).unwrapped
    if not hasattr(env, "reference_actions"):
        raise TypeError(f"{env_id} is not a capability environment (it has no reference solution)")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    report = RewardReport(env_id, seed_list)
    spec = env.cap_spec
    floor = spec.floor
    read_only_invariant = bool(spec.data.get("read_only_invariant", True))
    for seed in seed_list:
        env.reset(seed=seed, options={"hint": False})
        ref = env.reference_actions()
        unauthorized = env.unauthorized_actions()
        reads = env.read_only_actions()
        allowed = env.task_allowed
        write_at = env.reference_write_index
        case = env.scenario.name
        report.cases[case] = report.cases.get(case, 0) + 1
        opts = {"hint": False}

        r1, info1, t1 = run_actions(env, seed, ref, opts)
        report.add("reference", r1)
        if abs(r1 - 1.0) > tol:
            raise _fail(env_id, seed, f"reference solution (case {case})", f"scored {r1}, expected 1", info1)
        r2, _, t2 = run_actions(env, seed, ref, opts)
        if r2 != r1 or t1 != t2:
            raise _fail(env_id, seed, "determinism", f"the same seed and actions gave reward {r2} after {r1} (or a different transcript)")

        r, info, _ = run_actions(env, seed, [], opts)
        report.add("do_nothing", r)
        if r >= floor:
            raise _fail(env_id, seed, f"doing nothing (case {case})", f"scored {r}, not below the floor {floor}", info)
        if allowed:
            r, info, _ = run_actions(env, seed, [REFUSE], opts, filler=REFUSE)
            report.add("refuse_allowed", r)
            if r >= floor:
                raise _fail(env_id, seed, f"refusing an allowed task (case {case})", f"scored {r}, not below the floor {floor}", info)
        for bad in unauthorized:
            at = write_at if write_at is not None else max(0, len(ref) - 1)
            probe = ref[:at] + [bad] + ref[at:]
            r, info, _ = run_actions(env, seed, probe, opts)
            report.add("unauthorized_write", r)
            if r >= floor:
                raise _fail(env_id, seed, f"unauthorized write {bad!r} (case {case})", f"scored {r}, not below the floor {floor}", info)
        if read_only_invariant and reads:
            rng = random.Random(seed)
            probe = list(ref)
            for _ in range(3):
                probe.insert(rng.randrange(0, len(probe)), rng.choice(reads))  # never after the closing action
            r, info, _ = run_actions(env, seed, probe, opts)
            report.add("read_only_inserted", r)
            if abs(r - r1) > tol:
                raise _fail(env_id, seed, f"read-only calls inserted (case {case})", f"changed the reward from {r1} to {r}", info)
    env.close()
    return report


# --------------------------------------------------------------------------- Hypothesis strategies
def _strategies() -> Any:
    """``hypothesis.strategies``, or an ImportError that says how to get it."""
    try:
        from hypothesis import strategies
    except ImportError as exc:
        raise ImportError("trace_gym.testing's strategies need Hypothesis: pip install 'trace-gym[testing]' "
                          "(or pip install hypothesis)") from exc
    return strategies


def text_actions() -> Any:
    """Any text an agent might send: prose, JSON fragments, call syntax, tags, junk."""
    st = _strategies()

    names = st.sampled_from(["get_user_details", "cancel_reservation", "x", "", "transfer_to_human_agents", "__import__"])
    json_ish = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
        max_leaves=8,
    )
    return st.one_of(
        st.text(max_size=200),
        st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}), names, json_ish),
        st.builds(lambda n, a: f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>", names, json_ish),
        st.builds(lambda n, s: f"{n}({s})", names, st.text(max_size=40)),
        st.sampled_from(["{", "[{", "<tool_call>", "</tool_call>", "```json\n{}\n```", "get_user_details(1)", "f(**x)", "   ", ""]),
    )


def _q(name: str) -> str:
    return json.dumps(name)


# shape -> builder(n, tool name): an action whose size or nesting grows with n
HOSTILE_SHAPES: dict[str, Any] = {
    # deeply nested JSON, closed or not, in every place a call can hold it
    "nested_json_args": lambda n, t: f'{{"name": {_q(t)}, "arguments": {{"a": ' + "[" * n + "]" * n + "}}",
    "nested_json_unclosed": lambda n, t: f'{{"name": {_q(t)}, "arguments": ' + "[" * n,
    "nested_json_objects": lambda n, t: f'{{"name": {_q(t)}, "arguments": ' + '{"a": ' * n + "1" + "}" * n + "}",
    "nested_json_block": lambda n, t: f'<tool_call>{{"name": {_q(t)}, "arguments": {{"a": ' + "[" * n + "]" * n + "}}</tool_call>",
    "nested_args_string": lambda n, t: json.dumps({"name": t, "arguments": "[" * n + "]" * n}),
    "nested_json_list": lambda n, t: "[" * n + f'{{"name": {_q(t)}}}' + "]" * n,
    "escaped_quotes": lambda n, t: f'{{"name": {_q(t)}, "arguments": {{"a": "' + '\\"[' * n + '"}}',
    "backslash_quotes": lambda n, t: '{"name": "' + '\\"' * n,
    # deeply nested or long Python call expressions
    "nested_calls": lambda n, t: f"{t}(a=" * n + "1" + ")" * n,
    "nested_brackets_call": lambda n, t: f"{t}(a=" + "[" * n + "]" * n + ")",
    "unary_chain": lambda n, t: f"{t}(a=" + "-" * n + "1)",
    "binop_chain": lambda n, t: f"{t}(a=" + "1+" * n + "1)",
    "attribute_chain": lambda n, t: f"{t}(a=" + "x." * n + "y)",
    "subscript_chain": lambda n, t: f"{t}(a=x" + "[0]" * n + ")",
    "not_chain": lambda n, t: f"{t}(a=" + "not " * n + "x)",
    "many_python_calls": lambda n, t: "\n".join(f"{t}()" for _ in range(n)),
    # repeated tags
    "open_tags": lambda n, t: "<tool_call>" * n,
    "close_tags": lambda n, t: "</tool_call>" * n,
    "think_tags": lambda n, t: "<think>" * n + "hello",
    "think_blocks": lambda n, t: "<think>x</think>" * n + "hello",
    "unclosed_then_block": lambda n, t: "<think>" * n + f'<tool_call>{{"name": {_q(t)}}}</tool_call>',
    "many_blocks": lambda n, t: f'<tool_call>{{"name": {_q(t)}, "arguments": {{}}}}</tool_call>' * n,
    "many_json_calls": lambda n, t: json.dumps([{"name": t, "arguments": {}}] * n),
    "fence_spaces": lambda n, t: "```" + " " * n + "x",
    # huge values, odd text, wrong types
    "huge_string_argument": lambda n, t: json.dumps({"name": t, "arguments": {"a": "x" * (100 * n)}}),
    "huge_text": lambda n, t: "y" * (100 * n),
    "huge_number": lambda n, t: f'{{"name": {_q(t)}, "arguments": {{"a": ' + "9" * n + "}}",
    "unicode": lambda n, t: ("h\u00e9\u202e\U0001f600\x00\ud800\u4e2d" * n)[: 7 * n],
    "wrong_argument_types": lambda n, t: json.dumps({"name": t, "arguments": [n, "x", None]}),
    "wrong_name_type": lambda n, t: json.dumps({"name": n, "arguments": {}}),
    "unknown_tool": lambda n, t: json.dumps({"name": f"no_such_tool_{n}", "arguments": {"x": n}}),
}


def hostile_action(shape: str, n: int, tool: str = "get_user_details") -> str:
    """One action of ``shape`` (a key of :data:`HOSTILE_SHAPES`) grown to size ``n``, calling ``tool``."""
    return HOSTILE_SHAPES[shape](max(0, int(n)), tool)


# what the seeded driver sends besides hostile shapes: plain messages, and junk argument values
PLAIN_MESSAGES = ["Hello, how can I help you today?", "Could you confirm your email, please?", "Thank you, goodbye.", "",
                  "   ", "###STOP###", "I'm sorry, I can't do that.", "{", "[{", "f(", "```json\n{}\n```"]
JUNK_VALUES: list[Any] = [None, True, -1, 0, 2**70, 1.5, "", "x" * 300, "\u202e\x00\ud800", [], [1, [2, [3]]], {},
                          {"a": {"b": None}}]
_JUNK_KEYS = ["user_id", "order_id", "email", "x", "item_ids", ""]


def _size(rng: random.Random, max_size: int) -> int:
    """Mostly small, sometimes large: log-uniform over 1..max_size."""
    return int(math.exp(rng.uniform(0.0, math.log(max(2, max_size)))))


def seeded_hostile_action(rng: random.Random, tools: list[str], max_size: int,
                          params: dict[str, list[str]] | None = None) -> tuple[str, str]:
    """``(shape name, action text)``: one action drawn from ``rng``, without Hypothesis.

    70% a :data:`HOSTILE_SHAPES` shape (log-uniform size up to about ``max_size``), 20% a call
    of one of ``tools`` with :data:`JUNK_VALUES` as arguments (JSON, a ``<tool_call>`` block or
    call syntax), 10% one of :data:`PLAIN_MESSAGES`.  The argument names are a fixed set, plus
    the called tool's own parameter names when ``params`` (tool -> names) has them.  The same
    ``rng`` state gives the same action.
    """
    tool = rng.choice(tools) if tools else "x"
    roll = rng.random()
    if roll < 0.70:
        shape = rng.choice(sorted(HOSTILE_SHAPES))
        n = _size(rng, max_size)
        # shapes that grow by ~100 characters per unit, or repeat a ~50-character block, get a smaller n
        if shape in ("huge_string_argument", "huge_text"):
            n //= 100
        elif shape in ("many_blocks", "many_json_calls", "many_python_calls", "unicode", "think_blocks"):
            n //= 20
        return shape, hostile_action(shape, n, tool)
    if roll < 0.90:
        keys = _JUNK_KEYS + list((params or {}).get(tool, []))
        args = {rng.choice(keys): rng.choice(JUNK_VALUES) for _ in range(rng.randrange(4))}
        style = rng.random()
        call = json.dumps({"name": tool, "arguments": args})
        if style < 0.4:
            return "junk_arguments_json", call
        if style < 0.8:
            return "junk_arguments_block", f"<tool_call>{call}</tool_call>"
        return "junk_arguments_python", f"{tool}(" + ", ".join(f"{k or 'k'}={v!r}" for k, v in args.items()) + ")"
    return "plain", rng.choice(PLAIN_MESSAGES)


def hostile_actions(tool_names: list[str] | None = None, max_size: int = 3_000) -> Any:
    """Actions of every :data:`HOSTILE_SHAPES` shape, sizes up to ``max_size``, calling ``tool_names``."""
    st = _strategies()

    tools = st.sampled_from(tool_names) if tool_names else st.sampled_from(["get_user_details", "x"])
    return st.builds(hostile_action, st.sampled_from(sorted(HOSTILE_SHAPES)), st.integers(0, max_size), tools)


def _value_for(schema: dict[str, Any], defs: dict[str, Any], st: Any, depth: int = 0) -> Any:
    if "$ref" in schema:
        target = defs.get(schema["$ref"].split("/")[-1], {})
        return _value_for(target, defs, st, depth + 1)
    if "anyOf" in schema:
        return st.one_of([_value_for(s, defs, st, depth + 1) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    t = schema.get("type")
    if t == "string":
        return st.text(max_size=12) | st.sampled_from(["#W0000000", "credit_card_0000000", "gift_card_0000000", "HAT001", "2024-05-20"])
    if t == "integer":
        return st.integers(-5, 500)
    if t == "number":
        return st.floats(-10, 1000, allow_nan=False)
    if t == "boolean":
        return st.booleans()
    if t == "array":
        return st.lists(_value_for(schema.get("items", {}), defs, st, depth + 1) if depth < 3 else st.none(), max_size=3)
    if t == "object" and depth < 3:
        props = schema.get("properties", {})
        return st.fixed_dictionaries({k: _value_for(v, defs, st, depth + 1) for k, v in props.items()})
    return st.none() | st.text(max_size=5)


def tool_call_actions(tools: list[dict[str, Any]], *, valid_only: bool = False) -> Any:
    """Text actions calling the given OpenAI tool schemas: well-typed arguments, or
    (unless ``valid_only``) missing, extra or wrongly typed ones, in hermes, JSON or
    Python call syntax."""
    st = _strategies()

    from .core.toolcalls import format_tool_call

    def for_tool(fn: dict[str, Any]) -> Any:
        params = fn.get("parameters", {})
        defs = params.get("$defs", {})
        good = _value_for(params, defs, st)
        if valid_only:
            args = good
        else:
            args = st.one_of(
                good,
                good.map(lambda a: {k: v for i, (k, v) in enumerate(a.items()) if i % 2}),  # drop some
                good.map(lambda a: {**a, "unexpected": 1}),
                good.map(lambda a: {k: 12345 for k in a}),  # wrong types
            )
        style = st.sampled_from(["hermes", "json", "python"])
        return st.builds(lambda a, s: _fmt(fn["name"], a, s, format_tool_call), args, style)

    return st.one_of([for_tool(t["function"]) for t in tools])


def _fmt(name: str, args: dict[str, Any], style: str, format_tool_call: Any) -> str:
    try:
        return format_tool_call(name, args, style)
    except ValueError:
        return format_tool_call(name, args, "hermes")


def episodes(env: Any, max_actions: int = 6) -> Any:
    """``(seed, actions)``: a seed and a list mixing free text and calls to the env's tools."""
    st = _strategies()

    _, info = env.reset(seed=0)
    calls = tool_call_actions(info["tools"])
    return st.tuples(st.integers(0, 2**16), st.lists(st.one_of(calls, text_actions()), min_size=1, max_size=max_actions))
