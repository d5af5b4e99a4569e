"""Prompt rendering for chat-template models: one place for the policy and for training.

:func:`template_messages` prepares env messages (OpenAI chat dicts) for a model's chat
template: structured tool calls when the template renders ``tools=`` (:func:`native_tools`
probes that once per tokenizer), otherwise ``<tool_call>`` text, ``<tool_response>`` user
turns and the tool list in the system message, one compact line per tool
(:func:`compact_tool_line`) or as JSON schemas.  :func:`render_chat` applies the template.

Text calls come in one of :data:`TOOL_FORMATS`: ``hermes`` (one
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block per call) or ``smollm2``
(SmolLM2-Instruct's function-calling convention: a JSON list of calls in one
``<tool_call>[...]</tool_call>`` block, tools listed in ``<tools>...</tools>``).
:func:`resolve_tool_format` picks ``smollm2`` for SmolLM2's chat template and ``hermes``
otherwise when asked for ``auto``.
:class:`trace_gym.policies.hf.HFPolicy` renders its prompts with these functions and
:class:`trace_gym.train.chat.ChatRenderer` its training episodes, so an adapter is
trained on the prompts it is later evaluated with.

Torch-free: nothing here imports ``torch`` or ``transformers``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..core.toolcalls import format_tool_call

__all__ = [
    "PROBE_TOOL", "TOOL_FORMATS", "TOOL_LISTINGS", "ChatTemplateError", "action_stop_strings", "check_tool_template",
    "compact_tool_line", "end_of_turn", "format_calls", "native_tools", "render_chat", "resolve_tool_format",
    "template_messages", "tool_instructions",
]

PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "trace_gym_probe_tool",
        "description": "probe",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
    },
}


TOOL_LISTINGS = ("compact", "json")
# A tool-call format's name (not a model's): ``hermes`` one <tool_call> block per call; ``smollm2`` every call
# of an action as one JSON list in one block (SmolLM2's training format, also usable by other models).
HERMES_FORMAT, LIST_FORMAT = "hermes", "smollm2"
TOOL_FORMATS = (HERMES_FORMAT, LIST_FORMAT)
_SMOLLM_MARK = "SmolLM"  # SmolLM2's chat template names the model in its default system prompt


def resolve_tool_format(tokenizer: Any, tool_format: str = "auto") -> str:
    """``tool_format`` itself, or for ``auto`` the format the tokenizer's model was trained on.

    SmolLM2-Instruct (recognised by its chat template) was trained on calls written as a
    JSON list inside ``<tool_call>...</tool_call>``: ``smollm2``.  Every other model gets
    ``hermes``.  An unknown name raises :class:`ValueError`.
    """
    if tool_format == "auto":
        template = getattr(tokenizer, "chat_template", None)
        return LIST_FORMAT if isinstance(template, str) and _SMOLLM_MARK in template else HERMES_FORMAT
    if tool_format not in TOOL_FORMATS:
        raise ValueError(f"tool_format must be auto or one of {TOOL_FORMATS}, got {tool_format!r}")
    return tool_format


def action_stop_strings(tool_format: str) -> tuple[str, ...]:
    """The texts after which an action in ``tool_format`` is whole, so sampling can stop there.

    ``smollm2`` writes every call of an action in one ``<tool_call>[...]</tool_call>`` block:
    the closing tag ends the action.  ``hermes`` writes one block per call, so a closing tag
    may be followed by another call: only the end-of-turn token ends the action.
    """
    if tool_format not in TOOL_FORMATS:
        raise ValueError(f"tool_format must be one of {TOOL_FORMATS}, got {tool_format!r}")
    return ("</tool_call>",) if tool_format == LIST_FORMAT else ()


_EOT_MARK = "\u2063TRACE_GYM_ASSISTANT_MARK\u2063"


def end_of_turn(tokenizer: Any) -> str:
    """The text the chat template writes right after an assistant message's content (e.g. ``<|im_end|>\\n``)."""
    probe = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": _EOT_MARK}]
    text = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=False)
    return text[text.rindex(_EOT_MARK) + len(_EOT_MARK):]


def _type_name(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "|".join(json.dumps(v) for v in schema["enum"][:8])
    t = schema.get("type")
    if isinstance(t, list):
        return "|".join(str(x) for x in t)
    if t == "array":
        return f"list[{_type_name(schema.get('items'))}]"
    if t == "object" and isinstance(schema.get("properties"), dict):
        inner = ", ".join(f"{k}: {_type_name(v)}" for k, v in schema["properties"].items())
        return "{" + inner + "}"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return "|".join(_type_name(x) for x in schema[key])
    return str(t or "any")


def _first_sentence(text: str, limit: int = 200) -> str:
    text = " ".join(str(text or "").split())
    cut = re.search(r"(?<=[.!?])\s", text)
    if cut:
        text = text[: cut.start()]
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def compact_tool_line(tool: dict[str, Any]) -> str:
    """One line per tool: ``name(arg: type, opt?: type): first sentence of the description``.

    Argument names, types, enums and which arguments are required survive; long
    parameter descriptions do not.  Retail's 16 tools take ~0.9k tokens this way
    against ~3.4k as JSON schemas, which matters for small-context CPU models.
    """
    fn = tool.get("function", tool)
    params = fn.get("parameters") or {}
    required = set(params.get("required") or [])
    props = params.get("properties") or {}
    args = ", ".join(f"{k}{'' if k in required else '?'}: {_type_name(v)}" for k, v in props.items())
    desc = _first_sentence(fn.get("description", ""))
    return f"- {fn.get('name', '?')}({args})" + (f": {desc}" if desc else "")


def tool_instructions(tools: list[dict[str, Any]], listing: str = "compact", tool_format: str = "hermes") -> str:
    """The system-message text that lists ``tools`` and says how to call them in ``tool_format``."""
    if listing == "json":
        schemas = [t.get("function", t) for t in tools]
        body = (json.dumps(schemas, ensure_ascii=False) if tool_format == LIST_FORMAT
                else "\n".join(json.dumps(t, ensure_ascii=False) for t in schemas))
    elif listing == "compact":
        body = "\n".join(compact_tool_line(t) for t in tools)
    else:
        raise ValueError(f"tool_listing must be one of {TOOL_LISTINGS}, got {listing!r}")
    if tool_format == LIST_FORMAT:
        listed = body if listing == "json" else f"\n{body}\n"  # a JSON list inline, one line per tool otherwise
        return (
            "You can call functions to do what the user asks. These are the functions you can call:\n"
            f"<tools>{listed}</tools>\n\n"
            "To call functions, reply with the list of calls in this format and nothing else:\n"
            '<tool_call>[\n{"name": <a function listed above>, "arguments": {<argument>: <value>, ...}}\n]</tool_call>\n'
            "Write the real function name and argument names in double quotes, and give each argument a value "
            "of its declared type.\n"
            "To talk to the user (to answer, to ask for missing information, or to say that no function can do "
            "what they ask), reply with plain text, without <tool_call>."
        )
    if tool_format != "hermes":
        raise ValueError(f"tool_format must be one of {TOOL_FORMATS}, got {tool_format!r}")
    return (
        "You can use the following tools:\n<tools>\n"
        f"{body}\n</tools>\n"
        "To use a tool, reply with one block per call:\n"
        '<tool_call>\n{"name": "<tool name>", "arguments": {<arguments as JSON>}}\n</tool_call>\n'
        "To talk to the user, reply with plain text."
    )


def format_calls(calls: list[tuple[str, Any]], tool_format: str = "hermes") -> str:
    """``[(name, arguments), ...]`` as the text a model writes in ``tool_format`` (the environment parses it back)."""
    if tool_format == LIST_FORMAT:
        lines = ",\n".join(json.dumps({"name": n, "arguments": a}, ensure_ascii=False) for n, a in calls)
        return f"<tool_call>[\n{lines}\n]</tool_call>"
    if tool_format != "hermes":
        raise ValueError(f"tool_format must be one of {TOOL_FORMATS}, got {tool_format!r}")
    parts = []
    for name, args in calls:
        if isinstance(args, dict):
            parts.append(format_tool_call(name, args, style="hermes"))
        else:
            parts.append(f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>")
    return "\n".join(parts)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
    return raw


def template_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], native_tools: bool, tool_listing: str = "compact",
    tool_format: str = "hermes",
) -> list[dict[str, Any]]:
    """Chat dicts prepared for a chat template.

    With ``native_tools`` the template gets structured calls (arguments as dicts, as
    templates expect); otherwise calls become ``<tool_call>`` text, results become
    user turns wrapped in ``<tool_response>``, and the tool list goes into the system
    message, one line per tool (``tool_listing="compact"``) or as JSON schemas
    (``"json"``).  ``tool_format`` is how calls are written (:data:`TOOL_FORMATS`).
    """
    if tool_format not in TOOL_FORMATS:
        raise ValueError(f"tool_format must be one of {TOOL_FORMATS}, got {tool_format!r}")
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        content = m.get("content") or ""
        calls = m.get("tool_calls") or []
        if native_tools:
            d: dict[str, Any] = {"role": role, "content": content}
            if calls:
                d["tool_calls"] = [
                    {
                        "id": c.get("id"),
                        "type": "function",
                        "function": {"name": c["function"]["name"], "arguments": _arguments(c["function"].get("arguments"))},
                    }
                    for c in calls
                ]
            if role == "tool":
                d["tool_call_id"] = m.get("tool_call_id")
                if m.get("name"):
                    d["name"] = m["name"]
            out.append(d)
            continue
        if role == "assistant" and calls:
            parts = [content] if content else []
            parts.append(format_calls([(c["function"]["name"], _arguments(c["function"].get("arguments"))) for c in calls],
                                      tool_format))
            out.append({"role": "assistant", "content": "\n".join(parts)})
        elif role == "tool":
            out.append({"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"})
        else:
            out.append({"role": role, "content": content})
    if not native_tools and tools:
        extra = tool_instructions(tools, tool_listing, tool_format)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{extra}".strip()}
        else:
            out.insert(0, {"role": "system", "content": extra})
    return out


def native_tools(tokenizer: Any) -> bool:
    """Whether ``tokenizer``'s chat template renders ``tools=`` (checked with a probe tool).

    A template that fails on ``tools=`` has no tool support.
    """
    probe = [{"role": "user", "content": "hi"}]
    try:
        with_tools = tokenizer.apply_chat_template(probe, tools=[PROBE_TOOL], tokenize=False, add_generation_prompt=True)
        without = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
    except Exception:
        return False
    return "trace_gym_probe_tool" in with_tools and with_tools != without


def render_chat(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    native: bool,
    tool_listing: str = "compact",
    tool_format: str = "hermes",
    generation_prompt: bool = True,
) -> str:
    """The chat template's text for ``messages`` (prepared by :func:`template_messages`).

    ``native`` passes the tool schemas to the template; otherwise they are listed in the
    system message and calls are written in ``tool_format``.  Errors of the template propagate.
    """
    tools = list(tools or [])
    prepared = template_messages(messages, tools, native, tool_listing, tool_format)
    kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": generation_prompt}
    if tools and native:
        kwargs["tools"] = tools
    return tokenizer.apply_chat_template(prepared, **kwargs)


class ChatTemplateError(ValueError):
    """A model's chat template cannot carry tool calls; the message says why, on one line."""


_PROBE_RESULT = "trace_gym_probe_result"
# a conversation with a tool call and its result, as an env writes it: what every prompt of an episode holds
_PROBE_CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Probe the tool."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function", "function": {
        "name": PROBE_TOOL["function"]["name"], "arguments": '{"x": "y"}'}}]},
    {"role": "tool", "tool_call_id": "call_0", "name": PROBE_TOOL["function"]["name"], "content": _PROBE_RESULT},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Thanks."},
]


def check_tool_template(tokenizer: Any, *, native: bool, tool_format: str, tool_listing: str = "compact") -> None:
    """Refuse, with one :class:`ChatTemplateError` line, a tokenizer whose chat template cannot carry an episode:
    none at all, or one that fails on (or drops) a conversation with a system prompt, the tool list, an assistant
    tool call and the tool's result, rendered as :func:`render_chat` renders every prompt (``native``: the tools
    passed to the template; else listed in the system message and calls written in ``tool_format``)."""
    name = getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
    advice = ("use a chat (instruct) model, or give the tokenizer a chat template that renders every turn "
              "(tokenizer.chat_template; saved beside the model as chat_template.jinja)")
    if not getattr(tokenizer, "chat_template", None):
        raise ChatTemplateError(f"model {name} has no chat template, which trace-gym writes every prompt with: {advice}")
    try:
        text = render_chat(tokenizer, _PROBE_CONVERSATION, [PROBE_TOOL], native=native, tool_listing=tool_listing,
                           tool_format=tool_format)
    except Exception as exc:  # the template's own error (jinja's TemplateError, a raise_exception(...) of the template)
        why = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ChatTemplateError(f"the chat template of model {name} cannot carry tool calls: it fails on a "
                                f"conversation with a tool call and its result ({why}); {advice}") from None
    dropped = [what for what, ok in (("the tool list and the tool call", text.count(PROBE_TOOL["function"]["name"]) >= 2),
                                     ("the tool's result", _PROBE_RESULT in text)) if not ok]
    if dropped:
        raise ChatTemplateError(f"the chat template of model {name} cannot carry tool calls: it leaves out "
                                f"{' and '.join(dropped)}; {advice}")
