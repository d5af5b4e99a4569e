"""The need gate of the ``needs`` routing rule, built from what TRACE may see (:mod:`trace_gym.route.needs`).

Examples come from two places, both read through the envs' task sources (no episode is played, so nothing
is charged):

* the target's **learning tasks**: each task's opening request and offered tools (a reset), what its gold
  reference calls, whether its right answer is to refuse and, where the benchmark says so, which tools were
  withheld from it (:class:`~trace_gym.core.tasks.Gold`);
* each trained adapter's **capability env**: the same of ``n`` of its train-split tasks, so both the cases
  that act and those whose needed tool is withheld.

Every acting example is also paired with copies that withhold one tool it needs
(:func:`~trace_gym.route.needs.withheld_pairs`).  :func:`~trace_gym.route.needs.calibrate` then keeps the
example sets and thresholds that do best on the learning tasks, each left out in turn.  The capability envs'
acting requests are also returned as adapter examples, for the per-capability choice of the rule.

Errors: ``ValueError`` when the learning tasks hold no task to refuse or none to act on (the gate cannot be
calibrated), naming the counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..route.base import first_user_message, tool_names
from ..route.needs import Calibration, NeedExample, NeedGate, calibrate, withheld_pairs

__all__ = ["opening_examples", "GateBuild", "build_gate", "held_out_gate"]


def opening_examples(make_env: Callable[[], Any], tasks: Iterable[str], *, seed: int, origin: str,
                     prefix: str = "") -> list[NeedExample]:
    """One :class:`NeedExample` per task of the env ``make_env`` builds: its opening request and offered tools
    after a reset with the task's options (and ``seed``), and its gold (needs, refuse, withheld tools)."""
    from ..core.tasks import task_source

    env = make_env()
    try:
        src = task_source(env)
        out = []
        for t in tasks:
            _, info = env.reset(seed=seed, options=src.reset_options(str(t)))
            text = first_user_message(info.get("messages") or [])
            if not text:
                continue
            gold = src.gold(str(t))
            needs = None if gold.refuse else [a["name"] for a in gold.actions]
            out.append(NeedExample.make(text, tool_names(info.get("tools") or []) or [], needs, gold.refuse,
                                        f"{prefix}{t}", origin, gold.missing or None))
        return out
    finally:
        env.close()


@dataclass
class GateBuild:
    gate: NeedGate
    calibration: Calibration
    adapter_examples: dict[str, list[NeedExample]]  # adapter name -> its env's acting requests
    counts: dict[str, int]                          # examples per origin before calibration
    target_examples: list[NeedExample]              # the learning tasks' openings (source: the task id)

    def summary(self) -> dict[str, Any]:
        return {"calibration": {k: v for k, v in self.calibration.to_dict().items() if k != "table"},
                "examples": self.counts, "kept": len(self.gate.examples)}


def build_gate(target_env: Callable[[], Any], learning_tasks: Sequence[str],
               adapter_envs: dict[str, Callable[[], Any]], *, seed: int, per_env: int, embedder: Any = None) -> GateBuild:
    """The calibrated gate (module docstring); ``adapter_envs`` maps an adapter name to its capability env's
    factory, whose first ``per_env`` train-split tasks are read."""
    from ..core.tasks import task_source

    target = opening_examples(target_env, learning_tasks, seed=seed, origin="target")
    refusing = sum(e.refuse for e in target)
    if not refusing or refusing == len(target):
        raise ValueError(f"the need gate learns from the learning tasks: of {len(target)}, {refusing} are to refuse; "
                         "it needs some of each (a target whose gold never says to refuse cannot use the 'needs' rule)")
    capability: list[NeedExample] = []
    by_adapter: dict[str, list[NeedExample]] = {}
    for name, make in adapter_envs.items():
        probe = make()
        try:
            tasks = task_source(probe).task_ids("train")[:per_env]
        finally:
            probe.close()
        got = opening_examples(make, tasks, seed=seed, origin="capability", prefix=f"{name}#")
        capability += got
        by_adapter[name] = [e for e in got if not e.refuse]
    pairs = withheld_pairs([*target, *capability])
    examples = [*target, *capability, *pairs]
    gate, cal = calibrate(NeedGate.build(examples, embedder))
    counts = {"target": len(target), "target_refusals": refusing, "capability": len(capability), "withheld": len(pairs)}
    return GateBuild(gate, cal, by_adapter, counts, target)


def held_out_gate(index_path: str, make_env: Callable[[], Any], tasks: Sequence[str], *, seed: int) -> dict[str, Any] | None:
    """How the index's need gate judges held-out tasks, against their gold (a diagnostic, made after the
    evaluation; nothing is chosen from it): ``n``, ``correct``, ``refusals`` and how many of them it kept for the
    base model (``caught``), ``answerable`` and how many of them it also kept (``false_refusals``), and per task
    its row.  ``None`` when the index has no gate."""
    from ..route.embed import Embedder
    from ..route.index import RouterIndex

    gate = RouterIndex.load(index_path).gate
    if gate is None:
        return None
    examples = opening_examples(make_env, tasks, seed=seed, origin="held-out")
    vectors = Embedder(gate.model).encode([e.text for e in examples])
    rows = []
    for e, v in zip(examples, vectors, strict=True):
        sc = gate.score(v, e.tools)
        rows.append({"task": e.source, "refuse": e.refuse, "kept_for_base": gate.missing(v, e.tools),
                     "need": round(sc.need, 3), "tool": sc.tool, "refusal": round(sc.refusal, 3)})
    refusals = [r for r in rows if r["refuse"]]
    answerable = [r for r in rows if not r["refuse"]]
    caught = sum(r["kept_for_base"] for r in refusals)
    false = sum(r["kept_for_base"] for r in answerable)
    return {"n": len(rows), "correct": caught + len(answerable) - false, "refusals": len(refusals), "caught": caught,
            "answerable": len(answerable), "false_refusals": false, "rows": rows}
