"""A real OpenAI-compatible chat server on 127.0.0.1 over a Hugging Face model (for tests of clients that
speak the OpenAI API): ``POST /v1/chat/completions`` renders the messages with the model's chat template
and samples a reply with the request's ``max_tokens``, ``temperature`` and ``seed``."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatServer:
    """``with ChatServer(model, tokenizer) as url:`` serves until the block ends (then shuts down)."""

    def __init__(self, model: Any, tokenizer: Any, name: str = "tiny", request_timeout_s: float = 60):
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = request_timeout_s

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") == "/v1/models":
                    return self._send(200, {"object": "list", "data": [{"id": outer.name, "object": "model"}]})
                self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                try:
                    req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                    self._send(200, outer.complete(req))
                except Exception as exc:  # noqa: BLE001 - the client sees it
                    self._send(400, {"error": {"message": f"{type(exc).__name__}: {exc}"}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    def complete(self, req: dict[str, Any]) -> dict[str, Any]:
        import torch

        messages = [{"role": m["role"], "content": m.get("content") or ""} for m in req["messages"]]
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        max_new = int(req.get("max_tokens") or req.get("max_completion_tokens") or 32)
        temperature = float(req.get("temperature", 1.0) or 0.0)
        with self._lock:
            self.requests.append(req)
            if req.get("seed") is not None:
                torch.manual_seed(int(req["seed"]))
            with torch.no_grad():
                out = self.model.generate(**ids, max_new_tokens=max_new, do_sample=temperature > 0,
                                          temperature=temperature if temperature > 0 else None,
                                          pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id)
        new = out[0, ids["input_ids"].shape[1]:].tolist()
        eos = self.tokenizer.eos_token_id
        finish = "stop" if eos in new else "length"
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        n_prompt = int(ids["input_ids"].shape[1])
        return {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
                "model": self.name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish,
                             "logprobs": None}],
                "usage": {"prompt_tokens": n_prompt, "completion_tokens": len(new), "total_tokens": n_prompt + len(new)}}

    def __enter__(self) -> str:
        self._thread.start()
        return self.url

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)
