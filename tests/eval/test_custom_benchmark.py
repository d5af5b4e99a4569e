"""A benchmark defined here, with its own task source, runs through the generic evaluation and analysis
code unchanged: nothing in ``trace_gym`` knows its id, its reset option or its splits."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

from trace_gym.core import EpisodeOpening, Tool, ToolEnv, ToolSet, format_tool_call
from trace_gym.core.tasks import Gold, NoTaskSourceError, UnknownSplitError, UnknownTaskError

ENV_ID = "trace-test/lamps-v0"
# puzzle name -> (category, lamps to switch on)
PUZZLES = {"hall": ("easy", ["hall"]), "porch": ("easy", ["porch"]), "both": ("hard", ["hall", "porch"]),
           "all": ("hard", ["hall", "porch", "attic"])}
SPLITS = {"dev": ["hall", "both"], "holdout": ["porch", "all"]}


class LampTasks:
    """The task source of the lamps benchmark: its own splits, option name, gold and groups."""

    option_key = "puzzle"
    domain = None
    instruction = "You control the lamps of a house."

    def splits(self):
        return tuple(SPLITS)

    def default_split(self):
        return "holdout"

    def task_ids(self, split=None):
        name = split or self.default_split()
        if name not in SPLITS:
            raise UnknownSplitError(f"lamps has no split {name!r}; its splits are {sorted(SPLITS)}")
        return list(SPLITS[name])

    def _check(self, task_id):
        if task_id not in PUZZLES:
            raise UnknownTaskError(f"lamps has no puzzle {task_id!r}")

    def reset_options(self, task_id):
        self._check(task_id)
        return {"puzzle": task_id}

    def gold(self, task_id):
        self._check(task_id)
        calls = tuple({"name": "switch_on", "arguments": {"lamp": lamp}} for lamp in PUZZLES[task_id][1])
        return Gold(calls, frozenset({"switch_on"}), communicate=("all set",))

    def group(self, task_id):
        self._check(task_id)
        return PUZZLES[task_id][0]

    def task_id_of(self, info, options=None):
        return (options or {}).get("puzzle") or info.get("puzzle")


class LampsEnv(ToolEnv):
    """Switch on the lamps the user names; reward 1 when exactly those are on."""

    def __init__(self, max_steps: int = 8):
        super().__init__(max_steps=max_steps)
        self.on: set[str] = set()
        self.want: list[str] = []
        self.puzzle = ""

    def _switch_on(self, lamp: str) -> str:
        self.on.add(lamp)
        return f"{lamp} is on"

    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        self.puzzle = options.get("puzzle") or sorted(PUZZLES)[int(self.np_random.integers(len(PUZZLES)))]
        self.want, self.on = list(PUZZLES[self.puzzle][1]), set()
        tools = ToolSet([Tool("switch_on", "Switch a lamp on.", {"type": "object", "properties": {"lamp": {"type": "string"}},
                                                                  "required": ["lamp"]}, self._switch_on, "write")])
        return EpisodeOpening(f"{LampTasks.instruction} Switch on what the user asks for.", tools,
                       [{"role": "user", "content": "Please switch on: " + ", ".join(self.want)}], {"puzzle": self.puzzle})

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        self.end("user_stop")
        return [{"role": "user", "content": "Thanks. ###STOP###"}]

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        ok = self.on == set(self.want)
        return float(ok), {"lamps_on": sorted(self.on)}

    @property
    def task_source(self) -> LampTasks:
        return LampTasks()


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=f"{__name__}:LampsEnv")


class FirstLampOnly:
    """Switches on only the first lamp asked for, then says it is all set: right on one-lamp puzzles only."""

    policy_id = "first-lamp"

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if any(m["role"] == "tool" for m in messages):
            return "All set."
        first = next(m["content"] for m in messages if m["role"] == "user").split(": ")[1].split(", ")[0]
        return format_tool_call("switch_on", {"lamp": first})


def test_a_user_defined_benchmark_runs_through_eval_unchanged(tmp_path):
    from trace_gym.eval.harness import default_tasks, evaluate, task_option_key
    from trace_gym.rollout import TrajectoryStore

    assert default_tasks(ENV_ID) == ["porch", "all"] and default_tasks(ENV_ID, "dev") == ["hall", "both"]
    assert task_option_key(ENV_ID) == "puzzle"
    with pytest.raises(UnknownSplitError, match="dev"):
        default_tasks(ENV_ID, "test")

    store = tmp_path / "episodes.jsonl"
    rep = evaluate(ENV_ID, FirstLampOnly(), default_tasks(ENV_ID) + ["both"], 2, store=store)
    assert rep.results == {"porch": [True, True], "all": [False, False], "both": [False, False]}
    assert rep.groups == {"easy": ["porch"], "hard": ["all", "both"]}
    doc = rep.to_dict()
    assert doc["groups"]["easy"]["pass_hat_k"]["2"]["value"] == 1.0 and doc["groups"]["hard"]["perfect"] == 0
    trajs = TrajectoryStore(store).load()
    assert sorted({json.dumps(t.options) for t in trajs}) == sorted(json.dumps({"puzzle": p}) for p in ("porch", "all", "both"))
    assert {t.reset_info["puzzle"] for t in trajs} == {"porch", "all", "both"}  # the option played the task

    again = evaluate(ENV_ID, FirstLampOnly(), ["porch", "all", "both"], 2, store=store)  # resumes: nothing replayed
    assert again.rollouts == 0 and again.results == rep.results

    with pytest.raises(UnknownTaskError, match="attic"):
        evaluate(ENV_ID, FirstLampOnly(), ["porch", "attic"], 1)  # a typo fails before anything is played


class BatchedFirstLamp(FirstLampOnly):
    """The same moves, played a batch at a time; remembers which puzzles shared a batch."""

    def __init__(self):
        self.batches: list[set[str]] = []

    def act_batch(self, requests, seeds=None):
        self.batches.append({next(m["content"] for m in msgs if m["role"] == "user") for msgs, _ in requests})
        return [self.act(msgs, tools) for msgs, tools in requests]


def test_evaluation_batches_episodes_of_several_tasks_with_the_same_results(tmp_path):
    from trace_gym.eval.harness import evaluate

    tasks = ["porch", "all", "both"]
    one = evaluate(ENV_ID, FirstLampOnly(), tasks, 2)
    policy = BatchedFirstLamp()
    batched = evaluate(ENV_ID, policy, tasks, 2, batch_size=4, store=tmp_path / "e.jsonl")
    assert batched.results == one.results and batched.rewards == one.rewards and batched.rollouts == 6
    assert max(len(b) for b in policy.batches) >= 2  # a batch held more than one task
    assert max(len(b) for b in policy.batches) <= 4
    again = evaluate(ENV_ID, BatchedFirstLamp(), tasks, 2, batch_size=4, store=tmp_path / "e.jsonl")
    assert again.rollouts == 0 and again.results == one.results


def test_its_gold_reaches_the_offline_labeler(tmp_path):
    from trace_gym.analysis.labelers import GoldLabeler
    from trace_gym.analysis.labels import LabelValue
    from trace_gym.analysis.pipeline import items_from_trajectories
    from trace_gym.analysis.taxonomy import TAXONOMY
    from trace_gym.eval.harness import evaluate
    from trace_gym.rollout import TrajectoryStore

    evaluate(ENV_ID, FirstLampOnly(), ["both", "hall"], 1, store=tmp_path / "e.jsonl")
    items = {i.task_id: i for i in items_from_trajectories(TrajectoryStore(tmp_path / "e.jsonl").load())}
    assert set(items) == {"both", "hall"} and items["both"].write_tools == frozenset({"switch_on"})
    assert [a["arguments"]["lamp"] for a in items["both"].gold["actions"]] == ["hall", "porch"]
    run = GoldLabeler().label(list(items.values()), list(TAXONOMY), run=0, seed=0)
    got = {(lab.trajectory_id, lab.capability): lab.value for lab in run.labels}
    both, hall = items["both"].trajectory_id, items["hall"].trajectory_id
    assert got[(both, "tool-call-precision")] is LabelValue.LACKING  # porch was never switched on
    assert got[(hall, "tool-call-precision")] is LabelValue.PRESENT
    assert got[(both, "information-communication")] is LabelValue.PRESENT  # "All set." told the user


def test_the_gepa_baseline_and_compare_ask_the_same_source():
    from trace_gym.baselines.gepa_adapter import default_anchor
    from trace_gym.compare.methods import TaskPoolEnv, target_domain, target_has_gold, target_splits

    assert default_anchor(ENV_ID) == LampTasks.instruction and target_domain(ENV_ID) is None and target_has_gold(ENV_ID)
    train, test, how = target_splits(ENV_ID, seed=0)  # no train/test split: its default split is cut 60/40
    assert sorted(train + test) == ["all", "porch"] and len(train) == 1 and "60/40" in how
    env = TaskPoolEnv(gym.make(ENV_ID), ["both"])
    _, info = env.reset(seed=5)
    assert info["puzzle"] == "both"


def test_an_env_without_a_task_source_cannot_be_evaluated():
    from trace_gym.eval.harness import evaluate

    with pytest.raises(NoTaskSourceError, match="task_source"):
        evaluate("trace-test/counter-v0", FirstLampOnly(), ["1"], 1)


class GoldReplay:
    """Plays a task's gold calls, one per turn, then reports; knows nothing of the benchmark but its task source."""

    policy_id = "gold-replay"

    def __init__(self, env_id: str):
        from trace_gym.core.tasks import task_source_for

        self.source = task_source_for(env_id)
        self.calls: list[dict[str, Any]] = []

    def for_task(self, task: str) -> GoldReplay:
        self.calls = [dict(a) for a in self.source.gold(task).actions]
        return self

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        done = sum(1 for m in messages if m["role"] == "tool")
        if done < len(self.calls):
            return format_tool_call(self.calls[done]["name"], self.calls[done]["arguments"])
        return "All set."


def test_replaying_the_gold_reference_solves_every_task():
    from trace_gym.core.tasks import task_source_for
    from trace_gym.eval.harness import evaluate

    replay = GoldReplay(ENV_ID)
    for split in task_source_for(ENV_ID).splits():
        for task in task_source_for(ENV_ID).task_ids(split):
            assert evaluate(ENV_ID, replay.for_task(task), [task], 1).results == {task: [True]}
