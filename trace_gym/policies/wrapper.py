"""The base of policies that wrap another policy and change part of what it does.

A :class:`PolicyWrapper` forwards every feature it does not change to the policy it wraps
(:attr:`PolicyWrapper.inner`), as Gymnasium's ``Wrapper`` does for environments: ``policy_id``,
``accepts_seeds``, ``batchable``, ``reset``, ``bind_env``, ``act``, ``act_batch``, ``serve`` and any
other attribute (an adapter policy's ``decisions``, a model policy's ``tokenizer``).  A subclass
overrides what it changes and inherits the rest, so wrapping never drops a feature silently.

**The answering features.**  ``act`` is what the policy answers; ``act_batch`` and ``serve``
(:class:`~trace_gym.policies.base.RequestQueue`) are faster ways to the same answers.  A wrapper
that overrides ``act`` changes the answers, and the inner policy's ``act_batch`` or ``serve`` would
go round it, so such a wrapper does **not** forward them: without its own ``act_batch`` a rollout
asks its ``act`` one request at a time, and without its own ``serve`` it plays in lock step.  A
wrapper whose ``act`` only observes (counts, logs) and that is happy to be bypassed names the
features to forward anyway in :attr:`PolicyWrapper.bypassable`, e.g. ``bypassable = ("serve",)``.
A wrapper that overrides ``act_batch`` or ``serve`` must override ``act`` too (a ``TypeError`` at
class creation otherwise), so that the three never disagree.

Error contract: a feature the inner policy lacks (or one withheld as above) raises
``AttributeError`` as on any object, so :func:`~trace_gym.policies.base.supports` reports it absent;
what the inner policy raises passes through unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["PolicyWrapper", "unwrap"]

ANSWERING = ("act", "act_batch", "serve")


class PolicyWrapper:
    """Wraps ``inner`` (any :class:`~trace_gym.policies.base.Policy`); forwards what it does not override.

    ``policy_id`` is the inner policy's unless the wrapper sets its own (assigning it on the
    wrapper names the wrapper only).  :attr:`unwrapped` is the innermost policy.
    """

    #: Answering features (``act_batch``, ``serve``) forwarded although this wrapper overrides ``act``.
    bypassable: ClassVar[tuple[str, ...]] = ()

    def __init__(self, inner: Any):
        self.inner = inner

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if _overrides(cls, "act_batch") or _overrides(cls, "serve"):
            if not _overrides(cls, "act"):
                raise TypeError(f"{cls.__name__} overrides act_batch or serve but not act: the three answer alike")
        unknown = set(cls.bypassable) - {"act_batch", "serve"}
        if unknown:
            raise TypeError(f"{cls.__name__}.bypassable names {sorted(unknown)}; only act_batch and serve can be")

    def __getattr__(self, name: str) -> Any:
        # Called only for what the wrapper itself does not have.
        if name == "inner" or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(name)  # not set yet (copy, pickle): never recurse into inner
        if name in ANSWERING and _overrides(type(self), "act") and name not in type(self).bypassable:
            raise AttributeError(f"{type(self).__name__} changes act; the inner policy's {name} would bypass it")
        return getattr(self.inner, name)

    @property
    def policy_id(self) -> str:
        own = self.__dict__.get("_policy_id")
        return own if own is not None else self.inner.policy_id

    @policy_id.setter
    def policy_id(self, value: str) -> None:
        self.__dict__["_policy_id"] = value

    @property
    def unwrapped(self) -> Any:
        """The innermost policy (through any number of wrappers)."""
        return unwrap(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.inner!r}>"


def unwrap(policy: Any) -> Any:
    """``policy`` with every :class:`PolicyWrapper` around it taken off."""
    while isinstance(policy, PolicyWrapper):
        policy = policy.inner
    return policy


def _overrides(cls: type, name: str) -> bool:
    """Whether ``cls`` (a :class:`PolicyWrapper` subclass) defines ``name`` itself or in a base below PolicyWrapper."""
    for klass in cls.__mro__:
        if klass is PolicyWrapper:
            return False
        if name in klass.__dict__:
            return True
    return False
