"""trace-gym: turn an LLM agent's recurring failures into capability-targeted training environments."""

from .core import Message, TextSpace, Tool, ToolCall, ToolEnv, ToolSet, parse_action
from .registration import list_envs, register_all

__version__ = "0.2.0"

__all__ = ["Message", "TextSpace", "Tool", "ToolCall", "ToolEnv", "ToolSet", "list_envs", "parse_action", "__version__"]

register_all()
