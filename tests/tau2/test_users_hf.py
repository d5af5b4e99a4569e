"""The LLM user on a local Hugging Face model: a tiny random Llama, with and without a chat template."""

from __future__ import annotations

import pytest

from tests.extras import need

pytestmark = pytest.mark.model

torch = need("torch")
transformers = need("transformers")


def _tiny_model(vocab_size: int):
    cfg = transformers.LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=16384)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def _byte_level_tokenizer():
    """A tokenizer built in memory (no download): byte-level BPE without merges, plus a chat template."""
    tokenizers = need("tokenizers")
    alphabet = sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    for special in ("<s>", "</s>", "<pad>"):
        vocab[special] = len(vocab)
    tk = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = tokenizers.decoders.ByteLevel()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    tok.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] or '' }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    )
    return tok


def _episode(backend, seed):
    from trace_gym.tau2.env import Tau2Env
    from trace_gym.tau2.users import LLMUser

    env = Tau2Env("mock", user=LLMUser(backend))
    obs, info = env.reset(seed=seed, options={"task_id": "create_task_1"})
    first = info["messages"][-1]
    assert first["role"] == "user" and isinstance(first["content"], str)
    return first["content"], env


@pytest.mark.parametrize("with_template", [True, False])
def test_local_model_user_runs_and_is_seeded(with_template):
    from trace_gym.llm import ByteTokenizer, HFChatClient

    tok = _byte_level_tokenizer() if with_template else None
    model = _tiny_model(len(tok) if tok is not None else ByteTokenizer.vocab_size)
    backend = HFChatClient(model, tok, max_new_tokens=6, temperature=1.0)
    a, env = _episode(backend, seed=3)
    b, _ = _episode(backend, seed=3)
    assert a == b and len(a) > 0  # same seed, same sampled user text
    assert env.tau2_trajectory()[1] == {"role": "user", "content": a, "tool_calls": None}


def test_local_model_tool_calls_are_parsed_with_parse_action():
    from trace_gym.llm import ByteTokenizer, ChatReply, HFChatClient

    class Scripted(HFChatClient):
        """The model's decoded text is fixed; the parsing of tool calls is under test."""

        def __init__(self, text):
            super().__init__(model=None, tokenizer=ByteTokenizer())
            self.text = text

        def _generate_text(self, messages, tools, seed, temperature, max_new_tokens):
            return self.text

    tools = [{"type": "function", "function": {"name": "toggle_data", "parameters": {"type": "object", "properties": {}}}}]
    call = '<tool_call>{"name": "toggle_data", "arguments": {}}</tool_call>'
    assert Scripted(call).chat([], tools=tools).tool_calls == ({"id": None, "name": "toggle_data", "arguments": {}},)
    # without user tools, or when the text is no call, it is a message
    assert Scripted(call).chat([], tools=None) == ChatReply(call)
    assert Scripted("My phone is broken.").chat([], tools=tools) == ChatReply("My phone is broken.")
    assert ByteTokenizer().encode("hé") == [1, 104 + 3, 0xC3 + 3, 0xA9 + 3]  # BOS, then UTF-8 bytes offset by 3
    assert ByteTokenizer().decode(ByteTokenizer().encode("héllo")) == "héllo"
