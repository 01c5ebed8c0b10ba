"""A scripted fake OpenAI chat-completions model (SSE) for driving the real Pi offline.

Pi reaches models through `models.json` providers; one with `"api": "openai-completions"`
and this server's URL is all it talks to. The script is a list of tool calls
(`{"name": "bash", "arguments": {...}}`): each request gets the first call whose result
the conversation does not hold yet, and once every result is back, a short closing text.
Every request body is kept so tests can read what Pi sent back (a blocked call's reason).

Binds 127.0.0.1 on an ephemeral port. Standard library only.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class PiModel:
    def __init__(self, script: list[dict[str, Any]] | None = None, final_text: str = "All done."):
        self.script = list(script or [])
        self.final_text = final_text
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "PiModel":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def models_json(self) -> dict[str, Any]:
        """The `models.json` that points Pi at this server."""
        return {"providers": {"fake": {
            "baseUrl": self.url, "api": "openai-completions", "apiKey": "sk-test",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": "fake-model"}]}}}

    def tool_results(self) -> list[str]:
        """The text of every tool result Pi sent back, in order (from the last request)."""
        with self._lock:
            if not self.requests:
                return []
            messages = self.requests[-1].get("messages", [])
        out = []
        for m in messages:
            if m.get("role") == "tool":
                content = m.get("content")
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
                out.append(str(content))
        return out

    def _reply(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
        if done < len(self.script):
            call = self.script[done]
            delta = {"role": "assistant", "tool_calls": [{
                "index": 0, "id": f"call_{done + 1}", "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": self.final_text}
            finish = "stop"
        return [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**base, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}},
        ]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("content-length", 0))
                try:
                    body = json.loads(self.rfile.read(n) or b"{}")
                except ValueError:
                    body = {}
                with model._lock:
                    model.requests.append(body)
                events = model._reply(body)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for e in events:
                    self.wfile.write(b"data: " + json.dumps(e).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        return Handler
