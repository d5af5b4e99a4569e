"""A stand-in for vLLM on a CPU, so that TRL's own vLLM code (``trl.generation.vllm_generation``) runs in tests.

vLLM cannot run here (it needs CUDA), so the part of it TRL talks to is replaced, with vLLM's
call signatures and return structures:

* :class:`FakeLLM` is ``vllm.LLM`` (colocate mode): built with TRL's engine arguments (kept in
  :attr:`FakeLLM.engine_args`), it loads the model folder with transformers and samples
  ``generate(prompts, sampling_params, use_tqdm=)`` as vLLM does: per-prompt
  :class:`SamplingParams` (``n``, temperature, top-k/p, min-p, ``max_tokens``, ``stop``,
  ``stop_token_ids``, ``ignore_eos``, ``logprobs``), the end-of-sequence and stop tokens kept in
  ``token_ids``, a turn cut at ``max_model_len``, and each sampled token's *processed* log-prob
  (after temperature and truncation, vLLM's ``logprobs_mode="processed_logprobs"`` that TRL
  sets) in ``RequestOutput.outputs[i].logprobs`` as ``{token_id: Logprob}``.  Weights arrive as
  TRL sends them, through ``llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights``
  (an unknown name is a ``KeyError``, as in vLLM); ``sleep(level=2)`` discards them (zeros)
  and generating while asleep is an error;
* :class:`FakeVLLMClient` is TRL's ``VLLMClient`` (server mode): the same sampling behind
  ``generate(prompts, n=, ..., max_tokens=, logprobs=, generation_kwargs=)`` returning TRL's dict,
  and ``update_named_params`` for the weights;
* :func:`install` puts a ``vllm`` module (``LLM``, ``SamplingParams``, ``vllm.distributed.parallel_state``)
  in ``sys.modules`` and the names TRL imported from vLLM at load time into TRL's module.

:attr:`FakeLLM.live` holds the engines not yet garbage-collected (a freed engine leaves it); like vLLM's, an
engine stays referenced by the process-wide state until ``destroy_model_parallel`` is called.
"""

from __future__ import annotations

import gc
import importlib.machinery
import sys
import types
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class SamplingParams:
    """vLLM's ``SamplingParams`` fields that TRL and trace-gym set."""

    n: int = 1
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    max_tokens: int | None = 16
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    logprobs: int | None = None
    skip_special_tokens: bool = True
    structured_outputs: Any = None


@dataclass
class StructuredOutputsParams:
    regex: str | None = None


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True


class _Sampler:
    """The model and the sampling loop both fakes share."""

    def __init__(self, folder: str, seed: int, max_model_len: int | None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model = AutoModelForCausalLM.from_pretrained(folder).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.max_model_len = int(max_model_len or self.model.config.max_position_embeddings)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.asleep: set[str] = set()
        # what a test inspects after the engine is gone: weight loads, names loaded, each request's parameters
        self.record: dict[str, Any] = {"syncs": 0, "tensors": 0, "names": set(), "requests": [], "sleeps": 0, "calls": 0}
        eos = self.model.config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos]) - {None}

    def load_weights(self, weights) -> None:
        state = self.model.state_dict()
        tied = getattr(self.model.config, "tie_word_embeddings", False)
        with torch.no_grad():
            for name, tensor in weights:
                if name == "lm_head.weight" and tied:
                    continue
                if name not in state:
                    raise KeyError(f"vLLM model has no parameter {name!r}")
                state[name].copy_(tensor.to(state[name].dtype))
                self.record["names"].add(name)
                self.record["tensors"] += 1

    def sleep(self, level: int = 1) -> None:
        self.asleep = {"weights", "kv_cache"}
        self.record["sleeps"] += 1
        if level == 2:  # level 2 discards the weights
            with torch.no_grad():
                for p in self.model.parameters():
                    p.zero_()

    def wake_up(self, tags: list[str] | None = None) -> None:
        self.asleep -= set(tags or ["weights", "kv_cache"])

    @torch.no_grad()
    def sample(self, prompt: list[int], sp: SamplingParams) -> list[CompletionOutput]:
        if self.asleep:
            raise RuntimeError(f"generate on a sleeping engine ({sorted(self.asleep)} asleep)")
        if len(prompt) >= self.max_model_len:
            raise ValueError(f"The decoder prompt (length {len(prompt)}) is longer than the maximum model length of "
                             f"{self.max_model_len}.")
        self.record["requests"].append(sp)
        stops = [sp.stop] if isinstance(sp.stop, str) else list(sp.stop or [])
        window = max((len(x) for x in stops), default=0) + 1  # tokens whose text can hold a stop string just completed
        outs = []
        for index in range(sp.n):
            ids: list[int] = []
            lps: list[dict[int, Logprob]] = []
            finish, reason = "length", None
            out = self.model(input_ids=torch.tensor([prompt]), use_cache=True)
            while True:
                logits = out.logits[0, -1].float()
                token, logprob, rank = self._pick(logits, sp)
                ids.append(token)
                lps.append({token: Logprob(logprob, rank, self.tokenizer.decode([token]))})
                if token in self.eos and not sp.ignore_eos:
                    finish = "stop"
                    break
                if token in (sp.stop_token_ids or ()):
                    finish, reason = "stop", token
                    break
                hit = [x for x in stops if x in self.tokenizer.decode(ids[-window:], skip_special_tokens=True)]
                if hit:
                    finish, reason = "stop", hit[0]
                    break
                if len(ids) >= (sp.max_tokens or 1 << 30) or len(prompt) + len(ids) >= self.max_model_len:
                    break
                out = self.model(input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            if isinstance(reason, str) and not sp.include_stop_str_in_output:
                text = text[: text.find(reason)]
            outs.append(CompletionOutput(index, text, ids, sum(next(iter(d.values())).logprob for d in lps),
                                         lps if sp.logprobs is not None else None, finish, reason))
        return outs

    def _pick(self, logits: torch.Tensor, sp: SamplingParams) -> tuple[int, float, int]:
        if sp.temperature == 0:
            logp = torch.log_softmax(logits, -1)
            token = int(logits.argmax())
        else:
            logits = logits / sp.temperature
            if sp.top_k and sp.top_k > 0:
                kth = torch.topk(logits, min(sp.top_k, logits.numel())).values[-1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            if sp.top_p < 1.0:
                order = torch.argsort(logits, descending=True)
                probs = torch.softmax(logits[order], -1)
                drop = torch.cumsum(probs, -1) - probs > sp.top_p
                logits[order[drop]] = float("-inf")
            if sp.min_p:
                probs = torch.softmax(logits, -1)
                logits = logits.masked_fill(probs < sp.min_p * probs.max(), float("-inf"))
            logp = torch.log_softmax(logits, -1)
            token = int(torch.multinomial(logp.exp(), 1, generator=self.generator))
        value = float(logp[token])
        return token, value, int((logp > logp[token]).sum()) + 1


class FakeLLM:
    """``vllm.LLM`` for TRL's colocate mode (see the module docstring)."""

    live: weakref.WeakSet = weakref.WeakSet()
    created: list[dict[str, Any]] = []  # per engine made: {"args": its engine arguments, and its _Sampler.record}

    def __init__(self, model: str, **engine_args: Any):
        self.engine_args = {"model": model, **engine_args}
        self._sampler = _Sampler(model, engine_args.get("seed") or 0, engine_args.get("max_model_len"))
        # how many engines were still alive when this one was made (a previous training's not freed: > 0)
        FakeLLM.created.append({"args": self.engine_args, "record": self._sampler.record, "alive_before": live_engines()})
        runner = types.SimpleNamespace(model=types.SimpleNamespace(load_weights=self._sampler.load_weights))
        self.llm_engine = types.SimpleNamespace(
            model_config=types.SimpleNamespace(max_model_len=self._sampler.max_model_len),
            model_executor=types.SimpleNamespace(driver_worker=types.SimpleNamespace(model_runner=runner)))
        FakeLLM.live.add(self)
        _Teardown.engines.append(self)

    @property
    def sampler(self) -> _Sampler:
        return self._sampler

    def generate(self, prompts, sampling_params=None, *, use_tqdm: bool = True, lora_request=None) -> list[RequestOutput]:
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params or SamplingParams()] * len(prompts)
        self._sampler.record["calls"] += 1
        out = []
        for i, (p, sp) in enumerate(zip(prompts, params, strict=True)):
            ids = list(p["prompt_token_ids"])
            out.append(RequestOutput(str(i), None, ids, self._sampler.sample(ids, sp)))
        return out

    def reset_prefix_cache(self) -> bool:
        self._sampler.record["syncs"] += 1  # TRL resets the prefix cache once at the end of every weight sync
        return True

    def sleep(self, level: int = 1) -> None:
        self._sampler.sleep(level)

    def wake_up(self, tags: list[str] | None = None) -> None:
        self._sampler.wake_up(tags)


class FakeVLLMClient:
    """TRL's ``VLLMClient`` for server mode: generation and weight updates against a model folder
    (:attr:`folder`, set by the test) instead of a ``vllm serve`` process."""

    folder: str = ""
    made: list[FakeVLLMClient] = []

    def __init__(self, base_url: str | None = None, host: str = "0.0.0.0", server_port: int = 8000,
                 group_port: int = 51216, connection_timeout: float = 0.0):
        self.base_url = base_url
        self._sampler = _Sampler(self.folder, 0, None)
        FakeVLLMClient.made.append(self)
        self.communicator = False

    def init_communicator(self, device: Any = 0) -> None:
        self.communicator = True

    def close_communicator(self) -> None:
        self.communicator = False

    def get_server_info(self) -> dict[str, Any]:
        return {"model_config": {"logprobs_mode": "processed_logprobs"}}

    def reset_prefix_cache(self) -> None:
        self._sampler.record["syncs"] += 1

    def update_named_params(self, metadata, params) -> None:
        self._sampler.load_weights(params)

    def generate(self, prompts, features=None, n: int = 1, repetition_penalty: float = 1.0, temperature: float = 1.0,
                 top_p: float = 1.0, top_k: int = 0, min_p: float = 0.0, max_tokens: int = 16, logprobs: int | None = 0,
                 structured_outputs_regex: str | None = None, generation_kwargs: dict | None = None) -> dict[str, Any]:
        fields = dict(n=n, repetition_penalty=repetition_penalty, temperature=temperature, top_p=top_p, top_k=top_k,
                      min_p=min_p, max_tokens=max_tokens, logprobs=logprobs)
        fields.update(generation_kwargs or {})
        sp = SamplingParams(**fields)
        completions = [self._sampler.sample(list(p), sp) for p in prompts]
        flat = [c for outs in completions for c in outs]
        return {"prompt_ids": [list(p) for p in prompts], "completion_ids": [c.token_ids for c in flat],
                "logprobs": [[[d[t].logprob] for d, t in zip(c.logprobs, c.token_ids, strict=True)] for c in flat],
                "logprob_token_ids": [[[t] for t in c.token_ids] for c in flat]}


class _Teardown:
    """vLLM's process-wide state as far as the fakes need it: like vLLM's model-parallel groups, it holds every
    engine made in the process until ``destroy_model_parallel`` (so an engine nobody tears down stays alive),
    and :attr:`calls` records the teardown functions called."""

    calls: list[str] = []
    engines: list[Any] = []

    @classmethod
    def destroy_model_parallel(cls) -> None:
        cls.calls.append("destroy_model_parallel")
        cls.engines.clear()

    @classmethod
    def destroy_distributed_environment(cls) -> None:
        cls.calls.append("destroy_distributed_environment")


def _parallel_state() -> types.ModuleType:
    mod = types.ModuleType("vllm.distributed.parallel_state")
    mod.destroy_model_parallel = _Teardown.destroy_model_parallel
    mod.destroy_distributed_environment = _Teardown.destroy_distributed_environment
    return mod


def install(monkeypatch, *, launched: bool = False) -> type[_Teardown]:
    """Make ``import vllm`` and TRL's vLLM generation use the fakes for the test; returns the teardown record.
    ``launched``: the process is one of a distributed launch (its ``RANK``, ``WORLD_SIZE``, ... are the launcher's)."""
    import trl.generation.vllm_generation as trl_vllm

    vllm = types.ModuleType("vllm")
    vllm.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    vllm.__version__ = "0.30.0"  # within TRL 1.16's supported 0.22 - 0.31
    vllm.LLM, vllm.SamplingParams, vllm.RequestOutput = FakeLLM, SamplingParams, RequestOutput
    params = types.ModuleType("vllm.sampling_params")
    params.SamplingParams, params.StructuredOutputsParams = SamplingParams, StructuredOutputsParams
    distributed = types.ModuleType("vllm.distributed")
    state = _parallel_state()
    distributed.parallel_state = state
    for name, mod in (("vllm", vllm), ("vllm.sampling_params", params), ("vllm.distributed", distributed),
                      ("vllm.distributed.parallel_state", state)):
        monkeypatch.setitem(sys.modules, name, mod)
    for name, value in (("LLM", FakeLLM), ("SamplingParams", SamplingParams), ("StructuredOutputsParams", StructuredOutputsParams),
                        ("VLLMClient", FakeVLLMClient)):
        monkeypatch.setattr(trl_vllm, name, value, raising=False)
    # TRL's colocate mode writes these for vLLM: whatever they were before the test comes back after it.
    for var in () if launched else ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    _Teardown.calls, _Teardown.engines = [], []
    FakeLLM.created = []
    return _Teardown


def live_engines() -> int:
    """Engines still alive after a garbage collection."""
    gc.collect()
    return len(FakeLLM.live)


def save_tiny_model(folder, seed: int = 0) -> str:
    """The tiny test model and SmolLM2's tokenizer saved to ``folder`` (vLLM loads models from a folder)."""
    from trace_gym.policies.hf_models import tiny_test_model

    model, tok = tiny_test_model(seed)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)
