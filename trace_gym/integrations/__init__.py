"""trace-gym environments in other RL stacks.

Each integration is a module of its own, imported only when asked for, and each needs
its own optional extra:

* :mod:`trace_gym.integrations.trl` — TRL's ``GRPOTrainer``: its environment mode
  (``environment_factory=...``) or a ``rollout_func`` playing whole conversations
  (:func:`~trace_gym.integrations.trl.grpo_trainer_kwargs`) (the ``train`` extra);
* :mod:`trace_gym.integrations.records` — episodes of any policy as plain records, for any RL
  library (no extra);
* :mod:`trace_gym.integrations.openenv` — any registered id as an OpenEnv server
  (``trace-gym serve ENV_ID``) and OpenEnv's client for it (the ``openenv`` extra);
* :mod:`trace_gym.integrations.verifiers` — a taskset, env and harness of verifiers' ``verifiers.v1``
  stack, which ``vf-eval trace-gym-env`` loads (the ``verifiers`` extra);
* :mod:`trace_gym.integrations.skyrl` — a trace env as a SkyRL-gym env, registered in
  SkyRL-gym's registry (the ``skyrl`` extra).

``import trace_gym`` imports none of them.  docs/integrations.md shows each in use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(ImportError):
    """An integration's package is not installed; the message is one line naming the extra."""


def require(module: str, extra: str) -> Any:
    """Import ``module`` or raise :class:`MissingExtraError` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] != module.split(".")[0]:
            raise  # the package is there but something it imports is broken: show that
        raise MissingExtraError(f"{module} is not installed: pip install 'trace-gym[{extra}]'") from None
