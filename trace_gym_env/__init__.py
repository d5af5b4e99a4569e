"""trace-gym's envs as a verifiers environment module: ``vf-eval trace-gym-env`` (the ``verifiers`` extra).

verifiers loads an environment by importing the module its id names and taking the taskset, env and
harness classes listed in ``__all__``; these are :mod:`trace_gym.integrations.verifiers`'s::

    vf-eval trace-gym-env --env.taskset.env-id trace/tau2-retail-v0 --env.taskset.seeds '[0,1,2]' \\
        -m MODEL --client.base-url http://127.0.0.1:8000/v1 --no-push
"""

from trace_gym.integrations.verifiers import TraceEnv, TraceHarness, TraceTaskset

__all__ = ["TraceEnv", "TraceHarness", "TraceTaskset"]
