"""Token-level rendering of an episode with the model's own chat template.

An episode is one token sequence: the prompt (system prompt, tool list, opening
messages) followed by a *completion* that interleaves the agent's sampled turns
with the environment's replies.  Agent tokens are kept exactly as sampled; the
environment's replies are rendered as the chat template would render them after
an assistant turn, ending with the template's generation prompt, so the next
turn is sampled from a well-formed conversation.

Messages are rendered by :mod:`trace_gym.policies.prompting`, as
:class:`trace_gym.policies.hf.HFPolicy` renders them (native ``tools=`` when the
template supports it, else ``<tool_call>`` text, ``<tool_response>`` user turns and
the tool list in the system message), so an adapter is trained on the prompts it is
later evaluated with.  The template's text
around an assistant turn is found by rendering a small probe conversation, which
works for any template that renders a conversation as the concatenation of its
turns (ChatML, Llama 3, Mistral, ...).
"""

from __future__ import annotations

from typing import Any

from ..policies.prompting import (
    TOOL_LISTINGS,
    check_tool_template,
    end_of_turn,
    native_tools,
    render_chat,
    resolve_tool_format,
    template_messages,
)

__all__ = ["ChatRenderer"]

_MARK = "\u2063TRACE_GYM_ASSISTANT_MARK\u2063"


class ChatRenderer:
    """Turns env messages into token ids for one tokenizer.

    ``tools_in_prompt``: ``template`` passes the tool schemas to the chat template,
    ``system`` lists them in the system message, ``none`` leaves them out, and
    ``auto`` uses the template when it renders tools and the system message
    otherwise.  ``tool_listing`` is how a system-message listing writes them
    (``compact`` one line per tool, or ``json`` schemas) and ``tool_format`` how calls
    are written (``hermes``, ``smollm2`` or ``auto``: the model's own), as ``HFPolicy`` does.
    """

    def __init__(self, tokenizer: Any, tools_in_prompt: str = "auto", tool_listing: str = "compact",
                 tool_format: str = "auto"):
        if tools_in_prompt not in ("auto", "template", "system", "none"):
            raise ValueError(f"tools_in_prompt must be auto, template, system or none; got {tools_in_prompt!r}")
        if tool_listing not in TOOL_LISTINGS:
            raise ValueError(f"tool_listing must be one of {TOOL_LISTINGS}; got {tool_listing!r}")
        self.tokenizer = tokenizer
        self.tools_mode = tools_in_prompt
        self.tool_listing = tool_listing
        self.tool_format = resolve_tool_format(tokenizer, tool_format)
        if tools_in_prompt == "auto":
            self.native_tools = native_tools(tokenizer)
        else:
            self.native_tools = tools_in_prompt == "template"
        check_tool_template(tokenizer, native=self.native_tools, tool_format=self.tool_format,
                            tool_listing=tool_listing)  # ChatTemplateError (a ValueError): one line saying why
        self._eot_cache: str | None = None

    # ------------------------------------------------------------------ text level
    def _render(self, messages: list[dict[str, Any]], *, generation_prompt: bool, tools: list[dict[str, Any]] | None = None) -> str:
        tools = list(tools or []) if self.tools_mode != "none" else []
        return render_chat(self.tokenizer, messages, tools, native=self.native_tools, tool_listing=self.tool_listing,
                           tool_format=self.tool_format, generation_prompt=generation_prompt)

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
               generation_prompt: bool) -> str:
        """The template's text for a conversation (with or without the generation prompt after it)."""
        return self._render(messages, generation_prompt=generation_prompt, tools=tools)

    def end_of_turn(self) -> str:
        """The text the template writes right after an assistant message's content."""
        return self._end_of_turn()

    def prompt_text(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        """The prompt for the first agent turn, ending with the generation prompt (as ``HFPolicy`` renders it)."""
        return self._render(messages, generation_prompt=True, tools=tools)

    def _end_of_turn(self) -> str:
        """The text the template writes right after an assistant message's content."""
        if self._eot_cache is None:
            self._eot_cache = end_of_turn(self.tokenizer)
        return self._eot_cache

    def continuation_text(self, new_messages: list[dict[str, Any]], ended_with: str | None) -> str:
        """Text between a sampled assistant turn and the next generation.

        ``ended_with`` is the decoded stop token the turn ended with (``None`` when
        it hit the length limit): the part of the template's end-of-turn marker the
        agent already produced is not repeated.
        """
        base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": _MARK}]
        t_base = self._render(base, generation_prompt=False)
        t_full = self._render(base + list(new_messages), generation_prompt=True)
        eot = self._end_of_turn()
        if t_full.startswith(t_base):
            delta = t_full[len(t_base):]
        else:  # a template that rewrites earlier turns: fall back to a plain rendering of the new turns
            plain = template_messages(list(new_messages), [], False, tool_format=self.tool_format)
            delta = "".join(f"\n{m['role']}: {m['content']}" for m in plain) + "\nassistant: "
        if ended_with and eot.startswith(ended_with):
            eot = eot[len(ended_with):]
        return eot + delta

    # ------------------------------------------------------------------ token level
    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> list[int]:
        return self.encode(self.prompt_text(messages, tools))

    def continuation_ids(self, new_messages: list[dict[str, Any]], ended_with: str | None) -> list[int]:
        return self.encode(self.continuation_text(new_messages, ended_with))
