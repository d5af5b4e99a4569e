"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests: it answers POSTs from a queue.

``ChatServer().push(body, status, headers)`` queues a response; every request is kept in
``requests`` (``{"path", "headers", "body"}``).  An empty queue answers HTTP 500.
``ChatServer(answer=fn)`` answers every request with ``fn(body) -> (status, body)`` instead (a
server that computes its replies, e.g. from the request's ``model``).
The server thread is a daemon and ``close()`` shuts it down; the ``server`` fixture
(import ``server_fixture``) starts one per test and always closes it.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


def completion(content=None, tool_calls=None, finish="stop"):
    """A chat.completion body in the shape vLLM returns."""
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls or [], "reasoning_content": None}
    return {
        "id": "chatcmpl-8f3a",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "served-model",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish, "stop_reason": None}],
        "usage": {"prompt_tokens": 120, "total_tokens": 140, "completion_tokens": 20},
    }


def tool_call(name, arguments, idx=0):
    return {"id": f"chatcmpl-tool-{idx}", "type": "function", "function": {"name": name, "arguments": arguments}}


class ChatServer:
    def __init__(self, answer=None):
        self.responses: list[tuple[int, dict, bytes]] = []
        self.answer = answer
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                server.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
                if server.answer is not None:
                    status, reply = server.answer(json.loads(body))
                    headers, payload = {}, json.dumps(reply).encode()
                else:
                    status, headers, payload = server.responses.pop(0) if server.responses else (500, {}, b'{"error": "queue empty"}')
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def push(self, body, status=200, headers=None):
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.responses.append((status, headers or {}, payload))

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(name="server")
def server_fixture():
    s = ChatServer()
    yield s
    s.close()
