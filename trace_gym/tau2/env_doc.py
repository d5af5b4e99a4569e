"""What the τ²-bench envs report at the end of an episode, as the env reference lists it
(:attr:`~trace_gym.core.env.ToolEnv.termination_reasons`, :attr:`~trace_gym.core.env.ToolEnv.reward_info_keys`)."""

from __future__ import annotations

__all__ = ["TERMINATION_REASONS", "REWARD_INFO_KEYS"]

TERMINATION_REASONS = {
    "agent_stop": "the agent wrote `###STOP###` (or called `done` in solo mode)",
    "user_stop": "the user side stopped: `###STOP###`, `###TRANSFER###` or `###OUT-OF-SCOPE###`",
    "agent_error": "solo mode: the agent wrote a text message instead of calling a tool (scores 0)",
    "user_error": "the user simulator failed (`info[\"user_error\"]` says how; scores 0)",
    "too_many_errors": "`max_errors` tool calls returned an error (scores 0)",
    "max_steps": "the step limit was reached, or the caller ended the episode with `truncate()` (scores 0)",
}
REWARD_INFO_KEYS = {
    "reward": "tau2's reward: the product of the components in `reward_basis` (None when an NL assertion "
              "was not judged)",
    "db_check": "whether the agent's and the user's databases equal the gold ones",
    "env_assertions": "each environment assertion and whether it held",
    "action_checks": "each gold action and whether the agent or the user made it",
    "nl_assertions": "each natural-language assertion and the judge's verdict (None without a judge)",
    "communicate_checks": "each fact the agent had to tell the user and whether it did",
    "reward_basis": "the components this task's reward multiplies (None when nothing was checked)",
    "reward_breakdown": "each component's score",
    "info": "notes from the checks (why nothing was checked after a premature end)",
    "termination_reason": "the episode's termination reason",
    "reward_without_nl": "the reward with NL assertions left out",
    "nl_assertions_judged": "whether the NL assertions were judged (None: the task has none)",
    "evaluation_error": "`{type, message}` when an assertion raised (the reward is then 0)",
    "strict": "strict mode only: the strict reward and its components",
    "nl_note": "when NL assertions were not judged: how the reward was counted",
}
