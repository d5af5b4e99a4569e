"""Chat clients that run in this process: any trace-gym policy, a Python function, a local HF model."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .base import ChatReply, LLMError

__all__ = ["PolicyChatClient", "FunctionChatClient", "HFChatClient", "ByteTokenizer"]


class PolicyChatClient:
    """Any trace-gym policy (``act(messages, tools) -> str``) as a chat client.

    The policy's own sampling settings apply; a ``seed`` becomes its episode seed
    (``policy.reset(seed)``), so the same request with the same seed gives the same answer.
    With ``tools``, calls the policy writes as text come back as tool calls.
    """

    def __init__(self, policy: Any):
        self.policy = policy
        self.model = getattr(policy, "policy_id", type(policy).__name__)

    def chat(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
             seed: int | None = None, temperature: float | None = None, max_tokens: int | None = None) -> ChatReply:
        if seed is not None and hasattr(self.policy, "reset"):
            self.policy.reset(seed)
        text = self.policy.act(list(messages), list(tools or []))
        return ChatReply.from_text(str(text), tools)


class FunctionChatClient:
    """``fn(messages) -> str | ChatReply | assistant message dict`` as a chat client.

    For rule-based stand-ins and tests; every request is kept in ``requests``
    (``{"messages", "tools", "seed", "temperature", "max_tokens"}``).  An exception
    raised by ``fn`` becomes an :class:`LLMError`.
    """

    def __init__(self, fn: Callable[[list[dict[str, Any]]], Any], model: str = "function"):
        self.fn, self.model = fn, model
        self.requests: list[dict[str, Any]] = []

    def chat(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
             seed: int | None = None, temperature: float | None = None, max_tokens: int | None = None) -> ChatReply:
        msgs = json.loads(json.dumps(list(messages)))
        self.requests.append({"messages": msgs, "tools": tools, "seed": seed, "temperature": temperature,
                              "max_tokens": max_tokens})
        try:
            out = self.fn(msgs)
        except Exception as exc:
            raise LLMError(f"{self.model}: {type(exc).__name__}: {exc}") from exc
        if isinstance(out, ChatReply):
            return out
        if isinstance(out, Mapping):
            return ChatReply.from_message(out)
        return ChatReply.from_text(None if out is None else str(out), tools)


class ByteTokenizer:
    """A tokenizer-free fallback for local models: UTF-8 bytes as ids (offset 3), with BOS/EOS/PAD."""

    pad_token_id = 0
    bos_token_id = 1
    eos_token_id = 2
    vocab_size = 259
    chat_template = None

    def encode(self, text: str) -> list[int]:
        return [self.bos_token_id] + [b + 3 for b in text.encode("utf-8")]

    def decode(self, ids: Sequence[int], **_: Any) -> str:
        data = bytes(i - 3 for i in ids if 3 <= int(i) < 259)
        return data.decode("utf-8", errors="replace")

    @staticmethod
    def render(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None) -> str:
        """A plain chat rendering (our own) used when the tokenizer has no chat template."""
        parts = []
        if tools:
            parts.append("<tools>\n" + "\n".join(json.dumps(t.get("function", t)) for t in tools) + "\n</tools>")
        for m in messages:
            body = m.get("content") or ""
            if m.get("tool_calls"):
                body += "".join(
                    f"<tool_call>{json.dumps({'name': tc['function']['name'], 'arguments': json.loads(tc['function']['arguments'])})}</tool_call>"
                    for tc in m["tool_calls"]
                )
            parts.append(f"<|{m['role']}|>\n{body}")
        parts.append("<|assistant|>\n")
        return "\n".join(parts)


class HFChatClient:
    """A local Hugging Face causal LM as a chat client (CPU or GPU).

    ``model`` is a loaded model, or a name/path loaded (with its tokenizer) on first use.
    ``tokenizer`` may be any tokenizer with a chat template, or ``None``: the model's own
    for a name, :class:`ByteTokenizer` for a loaded model (whose vocabulary must then
    cover 259 ids).  Temperature 0 decodes greedily; sampling is seeded by ``seed``
    without touching the global torch RNG.  With ``tools``, calls in the generated text
    come back as tool calls.
    """

    def __init__(self, model: Any, tokenizer: Any = None, *, max_new_tokens: int = 128, temperature: float = 0.0,
                 device: str | None = None):
        self._name = model if isinstance(model, str) else None
        self._model = None if isinstance(model, str) else model
        self.tokenizer = tokenizer if tokenizer is not None or self._name else ByteTokenizer()
        self.model = self._name or type(model).__name__
        self.max_new_tokens, self.temperature, self.device = max_new_tokens, temperature, device

    def _load(self) -> Any:
        if self._model is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            if self.tokenizer is None:
                self.tokenizer = AutoTokenizer.from_pretrained(self._name)
            self._model = AutoModelForCausalLM.from_pretrained(self._name)
            if self.device:
                self._model.to(self.device)
        return self._model

    def _prompt_ids(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None) -> list[int]:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(list(messages), tools=list(tools) if tools else None,
                                          add_generation_prompt=True, tokenize=True)
            if isinstance(ids, Mapping) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return list(ids)
        return tok.encode(ByteTokenizer.render(messages, tools))

    def _generate_text(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
                       seed: int | None, temperature: float, max_new_tokens: int) -> str:
        import torch

        model = self._load()
        ids = self._prompt_ids(messages, tools)
        input_ids = torch.tensor([ids], dtype=torch.long, device=getattr(model, "device", "cpu"))
        sample = bool(temperature and temperature > 0)
        kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": sample,
                                  "attention_mask": torch.ones_like(input_ids)}
        if sample:
            kwargs.update(temperature=temperature, top_k=0, top_p=1.0)
        eos = getattr(self.tokenizer, "eos_token_id", None)
        pad = getattr(self.tokenizer, "pad_token_id", None)
        if eos is not None:
            kwargs["eos_token_id"] = eos
        kwargs["pad_token_id"] = pad if pad is not None else (eos if eos is not None else 0)
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(0 if seed is None else int(seed))
            out = model.generate(input_ids, **kwargs)
        new_ids = [int(i) for i in out[0, input_ids.shape[1]:].tolist()]
        if isinstance(self.tokenizer, ByteTokenizer):
            return self.tokenizer.decode(new_ids)
        return self.tokenizer.decode(new_ids, skip_special_tokens=True)

    def chat(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
             seed: int | None = None, temperature: float | None = None, max_tokens: int | None = None) -> ChatReply:
        temp = self.temperature if temperature is None else temperature
        text = self._generate_text(messages, tools, seed, temp, self.max_new_tokens if max_tokens is None else max_tokens)
        return ChatReply.from_text(text, tools)
