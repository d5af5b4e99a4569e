"""A model of one's own for tests: the tiny random-weight model (SmolLM2's tokenizer) saved to a folder under a
name of the test's choosing, as a user's fine-tuned chat model would be (``hf:FOLDER`` loads it)."""

from __future__ import annotations

from pathlib import Path


def save_chat_model(folder: Path, *, chat_template: str | None = "keep") -> Path:
    """Save the tiny model and its tokenizer to ``folder``; ``chat_template`` replaces the tokenizer's template
    (``None``: none at all; ``"keep"``: SmolLM2's own)."""
    from trace_gym.policies.hf import tiny_test_model

    model, tok = tiny_test_model(0)
    if chat_template != "keep":
        tok.chat_template = chat_template
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    if chat_template is None:  # a tokenizer saved without a template keeps none
        (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder
