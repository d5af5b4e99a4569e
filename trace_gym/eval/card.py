"""A capability report card: one policy scored on every capability env of a domain.

For each registered capability env whose domain is the one asked for (built-in specs,
``TRACE_GYM_ENVS_DIR`` folders and specs registered in this process), the policy plays the
first ``tasks`` scenario seeds of a split (``test`` by default: held out from training),
``trials`` times each, through :func:`trace_gym.eval.harness.evaluate` — resumable from a
trajectory store, with the refusal floor (:mod:`trace_gym.eval.floor`) beside it.  Each row
gives the mean reward with its 95% bootstrap interval (tasks resampled:
:func:`trace_gym.eval.metrics.bootstrap_mean`), the share of perfect episodes (reward 1)
and the refusal floor's mean reward on the same tasks.

Error contract: :func:`capability_envs` and :func:`report_card` raise :class:`CardError`
(a ``ValueError``, one line) for an unknown domain, a domain without capability envs, no
tasks, or trials below 1; a policy or an env that fails while playing raises its own error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..core.outcome import is_success
from .harness import default_tasks, evaluate
from .metrics import bootstrap_mean

__all__ = ["CardError", "CardRow", "capability_envs", "report_card", "card_table", "plot_card", "FORMAT"]

FORMAT = "trace-gym/card@1"


class CardError(ValueError):
    """A report card cannot be made from these inputs (the message says why, in one line)."""


@dataclass(frozen=True)
class CardRow:
    """One capability env's line of the card."""

    env_id: str
    spec_id: str             # the spec's id (the env id's short name)
    capability: str          # what the spec says it trains
    n_tasks: int
    episodes: int
    mean: float
    low: float               # 95% bootstrap interval of the mean (tasks resampled)
    high: float
    perfect: int             # episodes with reward 1
    floor: float | None      # the refusal policy's mean reward on the same tasks (None: not played)
    floor_perfect: int | None

    @property
    def perfect_share(self) -> float:
        return self.perfect / self.episodes if self.episodes else 0.0


def capability_envs(domain: str) -> list[str]:
    """The registered capability env ids whose spec is written over ``domain``, sorted."""
    from ..capabilities.domains import domain_names
    from ..registration import ENTRIES, register_all

    register_all()
    known = domain_names()
    if domain not in known:
        raise CardError(f"unknown capability domain {domain!r}; expected one of {known}")
    envs = sorted(e.id for e in ENTRIES if e.family == "capability" and e.domain == domain)
    if not envs:
        raise CardError(f"the {domain} domain has no capability envs; add spec files with 'domain: {domain}' to a "
                        "folder listed in TRACE_GYM_ENVS_DIR")
    return envs


def _spec_info(env_id: str) -> tuple[str, str]:
    """(spec id, the capability it trains) as the env's spec file says; the env id and its description for an env
    without one.  :class:`CardError` when the env's spec file no longer reads (changed or removed since registration)."""
    from ..registration import ENTRIES

    entry = next((e for e in ENTRIES if e.id == env_id), None)
    spec = (entry.kwargs if entry is not None else {}).get("spec")
    if spec is not None:
        from ..capabilities.specfile import SpecError, read_spec_document

        try:
            doc = read_spec_document(spec)
        except SpecError as exc:  # the env was registered from this file: it must still read
            raise CardError(f"{env_id}: its spec file cannot be read: {exc}") from None
        return str(doc.get("id") or env_id), str(doc.get("capability") or doc.get("title") or "")
    return env_id, entry.description if entry is not None else ""


def report_card(domain: str, policy: Any, *, tasks: int = 8, split: str | None = "test", trials: int = 1,
                base_seed: int = 0, store: str | Path | None = None, batch_size: int = 1, floor: bool = True,
                envs: Sequence[str] | None = None, env_kwargs: Mapping[str, Any] | None = None, boot_seed: int = 0,
                on_env: Callable[[str, Any], None] | None = None) -> dict[str, Any]:
    """Score ``policy`` on every capability env of ``domain`` (or on ``envs``); the card as a JSON-ready dict.

    ``tasks``: scenario seeds per env, the first of ``split``; ``trials``: episodes per task
    (trial ``j`` uses seed ``base_seed + j``); ``store``: a trajectory file to resume from
    (keys name the env, so one file serves every env); ``floor``: also play the refusal
    policy once per task.  ``on_env(env_id, EvalReport)`` is called after each env.
    """
    if tasks < 1:
        raise CardError(f"tasks must be >= 1, got {tasks}")
    if trials < 1:
        raise CardError(f"trials must be >= 1, got {trials}")
    ids = list(envs) if envs is not None else capability_envs(domain)
    rows: list[CardRow] = []
    for env_id in ids:
        task_ids = default_tasks(env_id, split, env_kwargs)[:tasks]
        rep = evaluate(env_id, policy, task_ids, trials, store=store, base_seed=base_seed, batch_size=batch_size,
                       env_kwargs=dict(env_kwargs) if env_kwargs else None, floor=floor)
        mean = bootstrap_mean(rep.rewards, seed=boot_seed)
        vals = [r for rs in rep.rewards.values() for r in rs]
        fl = [rep.floor[t] for t in rep.rewards if t in rep.floor]
        rows.append(CardRow(env_id, *_spec_info(env_id), len(rep.rewards), len(vals), mean["value"], mean["low"],
                            mean["high"], sum(is_success(r, 1.0) for r in vals),
                            sum(fl) / len(fl) if fl else None, sum(is_success(r, 1.0) for r in fl) if fl else None))
        if on_env is not None:
            on_env(env_id, rep)
    return {"format": FORMAT, "domain": domain, "policy": getattr(policy, "policy_id", str(policy)), "split": split,
            "tasks": tasks, "trials": trials, "base_seed": base_seed,
            "rows": [{**asdict(r), "perfect_share": r.perfect_share} for r in rows]}


def card_table(card: Mapping[str, Any]) -> Any:
    """The card as a rich table that reads at 80 columns."""
    from rich.table import Table

    from ..render import fit_table

    t = Table(title=f"{card['policy']} on the {card['domain']} capabilities "
                    f"({card['tasks']} {card['split']} tasks × {card['trials']} trials)")
    t.add_column("spec")
    t.add_column("mean reward [95% CI]", justify="right")
    t.add_column("perfect", justify="right")
    t.add_column("floor", justify="right")
    for r in card["rows"]:
        t.add_row(r["spec_id"], f"{r['mean']:.3f} [{r['low']:.2f}, {r['high']:.2f}]",
                  f"{r['perfect']}/{r['episodes']}", "-" if r["floor"] is None else f"{r['floor']:.2f}")
    t.caption = "spec: trace/<spec>-v0; perfect: episodes with reward 1; floor: mean reward of an agent that refuses everything"
    return fit_table(t, "spec")


def plot_card(card: Mapping[str, Any], path: str | Path) -> Path | None:
    """A bar per capability env (mean reward, 95% interval, refusal floor as a tick) as a PNG;
    ``None`` when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = card["rows"]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(rows) + 2), 4))
    xs = list(range(len(rows)))
    means = [r["mean"] for r in rows]
    err = [[m - r["low"] for m, r in zip(means, rows, strict=True)], [r["high"] - m for m, r in zip(means, rows, strict=True)]]
    ax.bar(xs, means, 0.6, yerr=err, capsize=4, label="mean reward (95% CI)")
    floors = [(x, r["floor"]) for x, r in zip(xs, rows, strict=True) if r["floor"] is not None]
    if floors:
        ax.scatter([x for x, _ in floors], [f for _, f in floors], marker="_", s=600, color="black", label="refusal floor")
    ax.set_xticks(xs, [r["spec_id"] for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("reward")
    ax.set_title(f"{card['policy']} · {card['domain']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    from ..io import save_figure

    return save_figure(fig, path)
