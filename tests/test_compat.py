"""trace_gym.compat: the checkpointing argument names and the narrow warning filter."""

from __future__ import annotations

import dataclasses
import warnings

from trace_gym.compat import checkpointing_args, renamed_checkpointing_warnings_hidden


@dataclasses.dataclass
class _New:
    activation_checkpointing: bool | None = None
    gradient_checkpointing: bool | None = None


@dataclasses.dataclass
class _Old:
    gradient_checkpointing: bool = False


def test_checkpointing_args_use_the_name_the_config_knows():
    assert checkpointing_args(_New, True) == {"activation_checkpointing": True,
                                              "activation_checkpointing_kwargs": {"use_reentrant": False}}
    assert checkpointing_args(_Old, True) == {"gradient_checkpointing": True,
                                              "gradient_checkpointing_kwargs": {"use_reentrant": False}}
    assert checkpointing_args(_New, False) == {"activation_checkpointing": False}


def test_only_the_renamed_checkpointing_warnings_are_hidden():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with renamed_checkpointing_warnings_hidden():
            for name in ("is_gradient_checkpointing", "gradient_checkpointing_enable", "gradient_checkpointing"):
                warnings.warn(f"`{name}` is deprecated and will be removed in v6.", FutureWarning, stacklevel=1)
            warnings.warn("`something_else` is deprecated", FutureWarning, stacklevel=1)
            warnings.warn("`gradient_checkpointing` is deprecated", UserWarning, stacklevel=1)
        warnings.warn("`is_gradient_checkpointing` is deprecated", FutureWarning, stacklevel=1)  # outside: shown
    assert [str(w.message) for w in caught] == ["`something_else` is deprecated", "`gradient_checkpointing` is deprecated",
                                                "`is_gradient_checkpointing` is deprecated"]
