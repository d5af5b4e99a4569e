"""Dual control for capability episodes: the agent instructs, the user operates their own device.

In τ²-bench's telecom domain the agent changes the carrier's records while the user
changes their phone with tools of their own (``user_tools.json``).  A capability episode
runs both sides on the project's τ²-bench engine (:class:`~trace_gym.tau2.engine.Tau2Environment`):

* :class:`DualControlBackend` starts the engine on the episode's synthetic world — the agent
  database *and* the user's device (:func:`~trace_gym.capabilities.synthdb.telecom.generate_telecom_world`)
  — and runs agent calls (:meth:`~DualControlBackend.call`) and the user's own calls
  (:meth:`~DualControlBackend.user_call`, what the scripted user's ``do`` rules run) with the
  engine's results, error texts and account/phone sync.  There is no second phone model.
* The state rewards see (:meth:`~DualControlBackend.state_view`) is the world keyed for paths:
  each agent table as ``{id: record}`` (``[lines, L1234, roaming_enabled]``,
  ``[bills, B5678, status]``) plus the user's ``device`` and ``surroundings`` as they are
  (``[device, airplane_mode]``, ``[surroundings, payment_request]``).
* :func:`check_telecom_spec` is the telecom domain's load-time check: world sizes within the
  generator's range, and cases that serve every issue the world can be drawn with.
"""

from __future__ import annotations

import random
from typing import Any

from ..core.tools import ToolResult
from .specfile import SpecError
from .synthdb.telecom import ISSUES, SIZES, TABLE_KEYS, USER_KEYS, generate_telecom_world, split_world

__all__ = ["DualControlBackend", "check_telecom_spec", "BIND_CHECK_SEEDS"]

BIND_CHECK_SEEDS = 4  # every issue a spec's world can have must bind some case on the worlds of seeds 0..3


def _keyed(agent: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {table: {rec[key]: rec for rec in agent[table]} for table, key in TABLE_KEYS.items()}
    view.update({k: user[k] for k in USER_KEYS})
    return view


class DualControlBackend:
    """The τ²-bench engine on an injected agent database *and* user device (see the module docstring).

    Args:
        data: the loaded τ²-bench domain (:func:`~trace_gym.tau2.domain_spec.load_domain`); it must
            have a user side.
        world: the episode's world in canonical form (agent tables plus ``device`` and
            ``surroundings``; other keys are scenario material and ignored).  It is shared, never changed.

    Error contract: :meth:`call` and :meth:`user_call` never raise; a failed call is a
    ``ToolResult(error=True)`` with the engine's text and changes nothing.
    """

    def __init__(self, data: Any, world: dict[str, Any], *, _bases: tuple[Any, Any] | None = None,
                 _initial: dict[str, Any] | None = None):
        from ..tau2.db import DbState
        from ..tau2.engine import Tau2Environment

        if _bases is None:
            agent, user = split_world(world)
            _bases = (data.base_from(agent), data.base_from(user, user=True))
        self._data, self._world, self._bases = data, world, _bases
        env = Tau2Environment(data, db=_bases[0])
        if env.user_tools is None:
            raise ValueError(f"the τ²-bench {data.name} domain has no user side: no dual control")
        env.user_db = DbState(_bases[1])
        env.user_tools.db = env.user_db
        env.sync_tools()  # a generated world is already synced: this changes nothing
        self._env = env
        self.domain = env.domain
        self._initial = self.state_view() if _initial is None else _initial  # a fork shares its parent's

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        """One agent tool call (the user's tools are not the agent's)."""
        return self._env.get_response(name, args)

    def user_call(self, name: str, args: dict[str, Any]) -> ToolResult:
        """One call of the user's own tools on their device (the agent's tools are not the user's)."""
        return self._env.get_response(name, args, requestor="user")

    def initial_db(self) -> dict[str, Any]:
        """The state the episode started from, keyed (do not mutate)."""
        return self._initial

    def current_db(self) -> dict[str, Any]:
        """The state now, keyed, as a fresh copy."""
        return _keyed(self._env.canonical_db(), self._env.canonical_user_db() or {})

    def state_view(self) -> dict[str, Any]:
        """The state now, keyed, without a copy (shares unchanged records with :meth:`initial_db`: read only)."""
        env = self._env
        return _keyed(env.db.data, env.user_db.data)

    def fingerprint(self) -> str:
        """Equal iff both the agent database and the user's device are the same."""
        env = self._env
        return f"{env.db.hash('canonical')}:{env.user_db.hash('canonical')}"

    def fork(self) -> DualControlBackend:
        """A fresh backend on the same starting world (used to dry-run reference solutions)."""
        return DualControlBackend(self._data, self._world, _bases=self._bases, _initial=self._initial)


# ------------------------------------------------------------------ load-time checks
def _range(value: Any, knobs: dict[str, Any]) -> tuple[float, float]:
    """The values a ``db`` size can take over its knob's range (a plain number: itself)."""
    if not isinstance(value, dict):
        return float(value), float(value)
    k = knobs[value["knob"]]
    scale = float(value.get("scale", 1.0))
    ends = sorted(((1.0 - k[e]) if value.get("complement") else k[e]) * scale for e in ("min", "max"))
    return ends[0], ends[1]


def check_telecom_spec(doc: dict[str, Any], source: str) -> None:
    """The telecom world a spec asks for can be drawn, and every issue it can hold binds a case.

    Raises :class:`SpecError` naming the field: an unknown ``db`` size, a size (or the knob that
    sets it) outside :data:`~trace_gym.capabilities.synthdb.telecom.SIZES`, an issue that can be
    drawn but that no case binds on (``db.issue_<name>``), or a case that binds on no world the
    spec can draw (its first failing slot).
    """
    from .scenario import UnsolvableScenarioError, bind_scenario
    from .spec_doc import CapabilitySpec, resolve_number

    knobs_decl = doc.get("difficulty", {})
    db = doc.get("db") or {}
    for key, value in db.items():
        if key not in SIZES:
            raise SpecError(source, f"db.{key}", f"a size of the telecom world {sorted(SIZES)}, got {key!r}")
        lo, hi = SIZES[key]
        a, b = _range(value, knobs_decl)
        if a < lo or b > hi:
            where = f"difficulty.{value['knob']}" if isinstance(value, dict) else f"db.{key}"
            raise SpecError(source, where, f"a value keeping db.{key} within [{lo}, {hi}], got [{a:g}, {b:g}]")
    possible = [name for name in ISSUES if _range(db.get(f"issue_{name}", 0), knobs_decl)[1] > 0] or ["none"]
    spec = CapabilitySpec(doc, source, list(doc["tools"]))
    knobs = spec.knobs()
    sizes = {k: int(resolve_number(v, knobs)) for k, v in db.items() if not k.startswith("issue_")}
    bound: set[int] = set()
    problems: dict[int, UnsolvableScenarioError] = {}
    for issue in possible:
        served = False
        for seed in range(BIND_CHECK_SEEDS):
            world = generate_telecom_world(random.Random(seed), **sizes, **{f"issue_{issue}": 1})
            for i, case in enumerate(doc["cases"]):
                try:
                    bind_scenario(spec, case, world, knobs, random.Random(seed), seed)
                except UnsolvableScenarioError as exc:
                    problems.setdefault(i, exc)
                    continue
                bound.add(i)
                served = True
        if not served:
            raise SpecError(source, f"db.issue_{issue}", f"an issue some case serves: no case binds on a world with the "
                                                         f"{issue!r} issue (seeds 0-{BIND_CHECK_SEEDS - 1}); add a case for it "
                                                         f"or keep its weight at 0")
    for i in range(len(doc["cases"])):
        if i not in bound:
            problem = problems.get(i)
            where = f"cases[{i}].slots.{problem.slot}" if problem is not None and problem.slot else f"cases[{i}]"
            raise SpecError(source, where, f"a case that binds on some world the spec can draw (issues {possible}): "
                                           f"{problem if problem is not None else 'no world binds it'}")
