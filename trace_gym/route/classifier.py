"""TRACE's final router: the base model picks a label from label log-probabilities.

The prompt lists the labels (every adapter's capability plus ``none``), shows the
examples retrieval found nearest to this conversation with their labels, then the
tools the conversation offers and its first user message.  Each label is scored by the mean log-probability
of its tokens as the continuation; the best label wins.  Scoring is a single batched
forward pass, deterministic for a given model.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from .base import NO_ADAPTER, first_user_message
from .retrieval import RetrievalRouter

__all__ = ["ClassifierRouter", "build_prompt"]


def build_prompt(query: str, labels: list[str], examples: list[tuple[str, str]], descriptions: dict[str, str] | None = None,
                 tools: list[dict[str, Any]] | None = None) -> str:
    """The classifier's prompt: the labels with their descriptions, retrieved examples, then the request and,
    when known, the tools the agent is offered (names and first description lines): a request whose needed
    tool is not offered is one for ``none``."""
    lines = ["Decide which skill a customer-service agent needs most for the request below.", "Labels:"]
    for lab in labels:
        desc = (descriptions or {}).get(lab)
        lines.append(f"- {lab}" + (f": {desc}" if desc else ""))
    lines.append(f"- {NO_ADAPTER}: none of the above is specially needed"
                 + (", or a tool the request needs is not offered" if tools is not None else ""))
    if examples:
        lines.append("Examples:")
        for text, lab in examples:
            lines.append(f"Request: {' '.join(text.split())[:400]}\nLabel: {lab}")
    if tools is not None:
        listed = []
        for t in tools:
            fn = t.get("function", t) if isinstance(t, dict) else {}
            if isinstance(fn, dict) and fn.get("name"):
                desc = " ".join(str(fn.get("description") or "").split())[:100]
                listed.append(f"{fn['name']}" + (f" ({desc})" if desc else ""))
        lines.append("Tools offered: " + ("; ".join(listed) if listed else "none"))
    lines.append(f"Request: {' '.join(query.split())[:800]}\nLabel:")
    return "\n".join(lines)


class ClassifierRouter:
    name = "classifier"

    def __init__(self, model: Any, tokenizer: Any, retrieval: RetrievalRouter | None = None, labels: list[str] | None = None,
                 descriptions: dict[str, str] | None = None, n_examples: int = 4, normalize: bool = True,
                 base_weights: Callable[[], AbstractContextManager[Any]] | None = None):
        if labels is None and retrieval is None:
            raise ValueError("ClassifierRouter needs labels or a retrieval router to take them from")
        self.model, self.tokenizer, self.retrieval = model, tokenizer, retrieval
        self.labels = sorted(labels if labels is not None else retrieval.labels)  # type: ignore[union-attr]
        self.descriptions, self.n_examples, self.normalize = descriptions or {}, n_examples, normalize
        self.base_weights = base_weights  # puts the base model's weights in place while scoring (merged adapters)

    def scores(self, query: str, tools: list[dict[str, Any]] | None = None) -> dict[str, float]:
        import torch

        examples: list[tuple[str, str]] = []
        if self.retrieval is not None and self.n_examples:
            for i, _ in self.retrieval.neighbours(query, self.n_examples, tools=tools):
                examples.append((self.retrieval.index.texts[i], self.retrieval.index.labels[i]))
        prompt = build_prompt(query, self.labels, examples, self.descriptions, tools)
        candidates = self.labels + [NO_ADAPTER]
        tok = self.tokenizer
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        seqs, spans = [], []
        for lab in candidates:
            l_ids = tok(" " + lab, add_special_tokens=False)["input_ids"]
            seqs.append(p_ids + l_ids)
            spans.append((len(p_ids), len(l_ids)))
        width = max(len(s) for s in seqs)
        pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):  # right padding: label tokens keep their positions
            ids[r, : len(s)] = torch.tensor(s)
            mask[r, : len(s)] = 1
        # The router is the *base* model: merged adapters are swapped out, a PEFT model's switched off.
        if self.base_weights is not None:
            ctx = self.base_weights()
        else:
            ctx = self.model.disable_adapter() if hasattr(self.model, "disable_adapter") else nullcontext()
        with ctx, torch.no_grad():
            logits = self.model(input_ids=ids.to(self.model.device), attention_mask=mask.to(self.model.device)).logits.float()
        logp = torch.log_softmax(logits, dim=-1)
        out = {}
        for r, (start, n) in enumerate(spans):
            target = ids[r, start : start + n].to(logp.device)
            lp = logp[r, start - 1 : start - 1 + n].gather(-1, target[:, None]).sum().item()
            out[candidates[r]] = lp / n if self.normalize else lp
        return out

    def route(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        text = first_user_message(messages)
        if text is None:
            return NO_ADAPTER
        s = self.scores(text, tools)
        return max(sorted(s), key=lambda k: s[k])
