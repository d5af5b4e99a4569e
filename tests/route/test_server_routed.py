"""Routed adapters behind an OpenAI-compatible server that serves them by name (as vLLM's ``--lora-modules``).

The server is a real HTTP server on 127.0.0.1 (``tests/helpers_llm.py``) that answers each request as the model
its ``model`` field names and refuses names it does not serve (HTTP 404, vLLM's error body).  A routed
evaluation through ``trace-gym eval --policy routed --model openai:URL#BASE`` sends each conversation to its
adapter, a batch's requests concurrently.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import gymnasium as gym
import pytest

from tests.helpers_llm import ChatServer, completion
from trace_gym.core import EpisodeOpening, ToolEnv, ToolSet
from trace_gym.core.tasks import UnknownTaskError
from trace_gym.policies import PolicyError
from trace_gym.route import NO_ADAPTER

ENV_ID = "trace-test/served-asks-v0"
BASE = "base-model"
SERVED = {BASE, "cap-refund", "cap-flight"}
# task -> (the user's request, the model that should answer it)
ASKS = {"refund": ("I want to return the shoes I bought and get my money back", "cap-refund"),
        "flight": ("Cancel my flight reservation to Boston for tomorrow", "cap-flight"),
        "weather": ("What is the weather like in Paris today", BASE)}


class AskTasks:
    option_key = "ask"
    domain = None
    instruction = "You are a helpful assistant."

    def splits(self):
        return ("test",)

    def default_split(self):
        return "test"

    def task_ids(self, split=None):
        return sorted(ASKS)

    def reset_options(self, task_id):
        if task_id not in ASKS:
            raise UnknownTaskError(f"no task {task_id!r}")
        return {"ask": task_id}

    def gold(self, task_id):
        return None

    def group(self, task_id):
        return "all"

    def task_id_of(self, info, options=None):
        return (options or {}).get("ask")


class AskEnv(ToolEnv):
    """One request; reward 1 when the reply comes from the model that should answer it."""

    def __init__(self):
        super().__init__(max_steps=2)
        self.ask = ""

    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        self.ask = options.get("ask") or sorted(ASKS)[int(self.np_random.integers(len(ASKS)))]
        return EpisodeOpening("You are a helpful assistant.", ToolSet(), [{"role": "user", "content": ASKS[self.ask][0]}], {})

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        self.end("answered")
        return []

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        said = " ".join(m.get("content") or "" for m in self.transcript() if m["role"] == "assistant")
        return float(f"served by {ASKS[self.ask][1]}." in said), {}

    @property
    def task_source(self) -> AskTasks:
        return AskTasks()


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=f"{__name__}:AskEnv")


class ServingServer(ChatServer):
    """Answers as the model a request names; an unknown name is vLLM's 404.  Records the most requests it
    had in flight at once."""

    def __init__(self):
        self.lock, self.in_flight, self.most = threading.Lock(), 0, 0
        self.gate = threading.Barrier(3, timeout=5)  # a batch of 3 is answered only once all 3 are in flight
        super().__init__(answer=self._answer)

    def _answer(self, body):
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            if self.gate is not None:
                self.gate.wait()
            model = body["model"]
            if model not in SERVED:
                return 404, {"error": {"message": f"The model `{model}` does not exist.", "type": "NotFoundError",
                                       "param": "model", "code": 404}}
            return 200, completion(f"served by {model}.")
        finally:
            with self.lock:
                self.in_flight -= 1


@pytest.fixture
def served():
    s = ServingServer()
    yield s
    s.close()


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    """A manifest of three adapters (one the server does not serve) and a router index over their requests."""
    from tests.extras import need

    need("sentence_transformers")
    from trace_gym.route import RouterIndex
    from trace_gym.route.embed import Embedder

    root = tmp_path_factory.mktemp("served-adapters")
    entries = [{"name": n, "path": n, "capability": n.removeprefix("cap-"), "base_model": BASE}
               for n in ("cap-refund", "cap-flight", "cap-extra")]
    (root / "manifest.json").write_text(json.dumps({"adapters": entries}))
    emb = Embedder()
    texts = [ASKS["refund"][0], ASKS["flight"][0], ASKS["weather"][0], "Add a gift wrap to my order"]
    labels = ["cap-refund", "cap-flight", NO_ADAPTER, "cap-extra"]
    index = RouterIndex(emb.model_name)
    index.add(texts, labels, [f"test:{i}" for i in range(len(texts))], emb.encode(texts), [[] for _ in texts])
    index.save(root / "router_index")
    return root


def test_a_routed_evaluation_sends_each_conversation_to_its_served_adapter(tmp_path, served, adapters, capsys):
    from trace_gym.cli import main

    rc = main(["eval", "--env", ENV_ID, "--policy", "routed", "--model", f"openai:{served.url}#{BASE}",
               "--adapters", str(adapters), "--trials", "1", "--batch-size", "3", "--out", str(tmp_path / "eval")])
    assert rc == 0, capsys.readouterr().err
    asked = sorted(r["body"]["model"] for r in served.requests)
    assert asked == sorted(model for _, model in ASKS.values())  # each conversation's adapter, once
    assert served.most == 3  # the batch's three requests, to three models, were in flight together
    report = json.loads((tmp_path / "eval" / "routed" / "report.json").read_text())
    assert report["rewards"] == {t: [1.0] for t in ASKS}  # every reply came from the model that should answer


def test_the_routed_policy_batches_and_routes_once_per_conversation(served, adapters):
    from trace_gym.eval.policies import resolve_policy
    from trace_gym.route.policy import ServerRoutedPolicy

    pol = resolve_policy("routed", model=f"openai:{served.url}#{BASE}", adapters=adapters, max_new_tokens=16)
    assert isinstance(pol, ServerRoutedPolicy) and pol.label_to_adapter["refund"] == "cap-refund"
    requests = [([{"role": "user", "content": ASKS[t][0]}], []) for t in ("refund", "flight", "weather")]
    assert pol.act_batch(requests, seeds=[1, 2, 3]) == [f"served by {ASKS[t][1]}." for t in ("refund", "flight", "weather")]
    served.gate = None
    assert pol.act_batch(requests[:1], seeds=[1]) == ["served by cap-refund."]  # the same conversation: its route kept
    assert [d["adapter"] for d in pol.decisions] == ["cap-refund", "cap-flight", NO_ADAPTER]
    assert all(r["body"]["max_tokens"] == 16 for r in served.requests)


def test_unknown_names_are_refused_by_the_server_and_by_the_registry(served, adapters):
    from trace_gym.eval.policies import resolve_policy
    from trace_gym.route.policy import ServerRoutedPolicy

    served.gate = None
    spec = f"openai:{served.url}#{BASE}"
    assert resolve_policy("adapter:cap-flight", model=spec, adapters=adapters).act([{"role": "user", "content": "hi"}], []) \
        == "served by cap-flight."
    with pytest.raises(KeyError, match="cap-ghost"):
        resolve_policy("adapter:cap-ghost", model=spec, adapters=adapters)
    unserved = resolve_policy("adapter:cap-extra", model=spec, adapters=adapters)  # registered, not served
    with pytest.raises(PolicyError, match="HTTP 404: The model `cap-extra` does not exist"):
        unserved.act([{"role": "user", "content": "hi"}], [])
    pol = resolve_policy("routed", model=spec, adapters=adapters)
    with pytest.raises(ValueError, match="does not serve"):
        ServerRoutedPolicy(pol.adapters.server, pol.router, ["cap-refund"], {"x": "cap-flight"})
    with pytest.raises(ValueError, match="classifier router"):
        resolve_policy("routed", model=spec, adapters=adapters, router="classifier")
