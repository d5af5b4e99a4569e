"""Pickling environments whose tools are closures.

A :class:`~trace_gym.core.tools.ToolSet` holds callables that are often closures over
the environment (a tool that reads the episode's database).  The standard pickler
refuses local functions, so :class:`PicklableByValue` routes ``pickle.dumps(env)``
through ``cloudpickle`` (a Gymnasium dependency, which it uses for the same reason in
its async vector env): closures travel by value, everything importable by reference,
and the result loads with plain ``pickle.loads``.  A pickled environment resumes exactly
where it was: same conversation, same world state, same random generator.
"""

from __future__ import annotations

import contextvars
import pickle
from typing import Any

__all__ = ["PicklableByValue"]

_INSIDE = contextvars.ContextVar("trace_gym_pickling_by_value", default=False)


def _restore(blob: bytes) -> Any:
    return pickle.loads(blob)


class PicklableByValue:
    """Mixin: ``pickle.dumps(obj)`` works even when ``obj`` holds closures."""

    __slots__ = ()

    def __reduce_ex__(self, protocol: Any) -> Any:
        if _INSIDE.get():  # already inside the by-value pass: the ordinary protocol, same pickler
            return object.__reduce_ex__(self, protocol)
        import cloudpickle

        token = _INSIDE.set(True)
        try:
            blob = cloudpickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            _INSIDE.reset(token)
        return _restore, (blob,)

    def __copy__(self) -> Any:
        """A shallow copy, as for any object (pickling by value is for ``pickle`` and ``deepcopy``)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new
