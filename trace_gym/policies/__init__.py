"""Policies: what chooses the agent's next text action.

* :class:`ScriptedPolicy` — a fixed list of actions or a Python callable;
* :class:`~trace_gym.policies.hf.HFPolicy` — a Hugging Face ``transformers`` model
  (imported lazily: ``torch`` loads only when it is used);
* :class:`~trace_gym.policies.openai_compat.OpenAICompatPolicy` — any
  OpenAI-compatible chat-completions server, such as vLLM.

:func:`policy_from_spec` builds one from a command-line spec, by the kinds registered in
:mod:`~trace_gym.policies.kinds`; :class:`PolicyWrapper` is the base of a policy that wraps another.
"""

from __future__ import annotations

from .base import Policy, PolicyError, Request, act_batch, reset_policy, supports
from .kinds import PolicyKind, policy_from_spec, register_policy_kind, spec_help
from .scripted import ScriptedPolicy, ScriptExhausted, load_actions, parse_actions
from .wrapper import PolicyWrapper

__all__ = [
    "Policy",
    "PolicyKind",
    "PolicyError",
    "PolicyWrapper",
    "Request",
    "ScriptedPolicy",
    "ScriptExhausted",
    "act_batch",
    "load_actions",
    "parse_actions",
    "policy_from_spec",
    "register_policy_kind",
    "reset_policy",
    "supports",
]

SPEC_HELP = spec_help()
"""The spec forms of the kinds trace-gym's policies package builds (what ``--policy`` of a rollout takes)."""
