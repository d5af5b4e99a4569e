"""Living with the versions of third-party libraries trace-gym runs on (torch-free).

transformers 5 renamed ``gradient_checkpointing*`` to ``activation_checkpointing*`` and
warns (``FutureWarning``) on every use of the old names.  trace-gym passes the new names
where it sets them (:func:`checkpointing_args`); PEFT and TRL still call the old methods
(``is_gradient_checkpointing`` when wrapping or loading an adapter,
``gradient_checkpointing_enable``/``_disable`` around every generation), which
:func:`renamed_checkpointing_warnings_hidden` hides while trace-gym drives them, and
nothing else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator
from typing import Any

__all__ = ["checkpointing_args", "renamed_checkpointing_warnings_hidden"]


def checkpointing_args(config_class: type, enabled: bool) -> dict[str, Any]:
    """The ``TrainingArguments`` keywords that turn activation checkpointing on or off, under the name
    ``config_class`` knows (the new one when it has it), with ``use_reentrant=False`` as torch asks."""
    names = {f.name for f in dataclasses.fields(config_class)} if dataclasses.is_dataclass(config_class) else set()
    prefix = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    out: dict[str, Any] = {prefix: bool(enabled)}
    if enabled:
        out[f"{prefix}_kwargs"] = {"use_reentrant": False}
    return out


@contextlib.contextmanager
def renamed_checkpointing_warnings_hidden() -> Iterator[None]:
    """Hide transformers' FutureWarnings about its renamed ``gradient_checkpointing*`` API inside the block."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`(is_)?gradient_checkpointing\w*` is deprecated", category=FutureWarning)
        yield
