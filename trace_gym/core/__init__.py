"""The torch-free core: text spaces, chat messages, tool calls, tools and ``ToolEnv``."""

from .env import EpisodeOpening, ToolEnv, render_messages
from .messages import Message, MessageError, ToolCall, validate_conversation
from .outcome import is_success, success_threshold
from .spaces import TextSpace
from .toolcalls import ParsedAction, format_tool_call, parse_action, strip_reasoning
from .tools import Tool, ToolError, ToolResult, ToolSet

__all__ = [
    "EpisodeOpening", "Message", "MessageError", "ParsedAction", "TextSpace", "Tool", "ToolCall", "ToolEnv",
    "ToolError", "ToolResult", "ToolSet", "format_tool_call", "is_success", "parse_action", "render_messages",
    "strip_reasoning", "success_threshold", "validate_conversation",
]
