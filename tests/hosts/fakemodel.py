"""A scripted fake model server for driving the real Claude Code and Codex offline.

It speaks just enough of two wire protocols:

* Anthropic Messages (`POST /v1/messages`, streaming SSE or plain JSON), used by Claude Code;
* OpenAI Responses (`POST /v1/responses`, SSE), used by Codex with `wire_api = "responses"`.

The script is a list of tool calls: each time the conversation reaches the model, the model
asks for the first scripted call the conversation does not hold yet; once the host has sent
back the result of the last one, the model ends the turn with a short text. Every request body is kept (in
memory and in a JSONL log) so tests can assert on what the host sent back, e.g. the text a
denied tool call returned.

The same port also acts as the hosts' HTTP(S) proxy: anything proxied to it (an absolute
URI or a CONNECT) is a host trying to reach the outside world; it is refused and logged.

Binds 127.0.0.1 on an ephemeral port. Standard library only.
"""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)


def _next_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}"


class FakeModel:
    """One scripted model. `script` is the tool calls the model asks for, in order, one
    per turn of the conversation:

    * for Claude: `{"name": "Bash", "input": {...}}`;
    * for Codex: `{"name": "exec_command", "arguments": {...}}`.

    A request whose `tools` do not offer the next call's tool (a side request of the host)
    gets the closing text.
    """

    def __init__(self, script: list[dict[str, Any]] | None = None,
                 log_path: str | None = None, final_text: str = "All done.",
                 review: str = "allow"):
        self.script = list(script or [])
        self.review = review
        self.final_text = final_text
        self.log_path = log_path
        self.requests: list[dict[str, Any]] = []
        self.refused: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeModel":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ---- what tests read -------------------------------------------------------------

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(entry)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry) + "\n")

    def bodies(self, path: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r["body"] for r in self.requests
                    if r.get("path") == path and isinstance(r.get("body"), dict)]

    def anthropic_tool_results(self) -> list[dict[str, Any]]:
        """Every `tool_result` block the host sent back to the model (deduplicated by id)."""
        seen: dict[str, dict[str, Any]] = {}
        for body in self.bodies("/v1/messages"):
            for message in body.get("messages", []):
                content = message.get("content")
                if message.get("role") != "user" or not isinstance(content, list):
                    continue
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        seen[block.get("tool_use_id", "")] = block
        return list(seen.values())

    def responses_outputs(self) -> list[dict[str, Any]]:
        """Every `function_call_output` item Codex sent back (deduplicated by call id)."""
        seen: dict[str, dict[str, Any]] = {}
        for body in self.bodies("/v1/responses"):
            items = body.get("input")
            if not isinstance(items, list):
                continue
            for item in items:
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    seen[item.get("call_id", "")] = item
        return list(seen.values())

    # ---- the scripts -----------------------------------------------------------------

    def _anthropic_reply(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """(stop_reason, content blocks) for one Messages request: the next scripted tool
        call not yet in the conversation, or the closing text once all are done."""
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        made = 0
        for message in body.get("messages") or []:
            content = message.get("content")
            if message.get("role") == "assistant" and isinstance(content, list):
                made += sum(1 for b in content
                            if isinstance(b, dict) and b.get("type") == "tool_use")
        if made < len(self.script) and self.script[made]["name"] in tools:
            call = self.script[made]
            return "tool_use", [{"type": "tool_use", "id": _next_id("toolu"),
                                 "name": call["name"], "input": call["input"]}]
        return "end_turn", [{"type": "text", "text": self.final_text}]

    def _responses_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The one output item for a Responses request, scripted the same way. A request
        for structured output is Codex's automatic approval review: it gets the scripted
        verdict."""
        fmt = (body.get("text") or {}).get("format") or {}
        if fmt.get("type") == "json_schema":
            verdict = {"risk_level": "low", "user_authorization": "high",
                       "outcome": self.review,
                       "rationale": f"scripted review: {self.review}"}
            return {"type": "message", "id": _next_id("msg"), "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": json.dumps(verdict),
                                 "annotations": []}]}
        items = body.get("input") or []
        made = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call")
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        if made < len(self.script) and self.script[made]["name"] in tools:
            call = self.script[made]
            return {"type": "function_call", "id": _next_id("fc"), "call_id": _next_id("call"),
                    "name": call["name"], "arguments": json.dumps(call["arguments"]),
                    "status": "completed"}
        return {"type": "message", "id": _next_id("msg"), "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": self.final_text,
                             "annotations": []}]}

    # ---- HTTP ------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _read_body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if not raw:
                    return None
                try:
                    return json.loads(raw)
                except ValueError:
                    return {"_raw": raw[:2000].decode("utf-8", "replace")}

            def _refuse_outside(self, target: str) -> None:
                with model._lock:
                    model.refused.append(f"{self.command} {target}")
                model.record({"method": self.command, "path": target, "refused": True})
                self._send(403, b"agentnotify host tests: no outside traffic\n", "text/plain")
                self.close_connection = True

            def _send(self, status: int, data: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _json(self, status: int, value: Any) -> None:
                self._send(status, json.dumps(value).encode(), "application/json")

            def _sse(self, events: list[tuple[str | None, dict[str, Any]]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for name, data in events:
                    chunk = (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
                    self.wfile.write(chunk.encode())
                    self.wfile.flush()
                self.close_connection = True

            def do_CONNECT(self) -> None:  # noqa: N802 (http.server naming)
                self._refuse_outside(self.path)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.startswith(("http://", "https://")):
                    return self._refuse_outside(self.path)
                model.record({"method": "GET", "path": self.path})
                if self.path.split("?")[0] == "/v1/models":
                    return self._json(200, {"object": "list", "data": [], "models": []})
                self._json(404, {"error": {"type": "not_found", "message": self.path}})

            def do_HEAD(self) -> None:  # noqa: N802
                if self.path.startswith(("http://", "https://")):
                    return self._refuse_outside(self.path)
                model.record({"method": "HEAD", "path": self.path})
                self._send(404, b"", "text/plain")

            def do_POST(self) -> None:  # noqa: N802
                if self.path.startswith(("http://", "https://")):
                    self._read_body()
                    return self._refuse_outside(self.path)
                body = self._read_body()
                path = self.path.split("?")[0]
                entry: dict[str, Any] = {"method": "POST", "path": path, "body": body}
                if path == "/v1/messages" and isinstance(body, dict):
                    stop, content = model._anthropic_reply(body)
                    entry["reply"] = stop
                    model.record(entry)
                    return self._anthropic(body, stop, content)
                if path == "/v1/messages/count_tokens":
                    model.record(entry)
                    return self._json(200, {"input_tokens": 100})
                if path == "/v1/responses" and isinstance(body, dict):
                    item = model._responses_reply(body)
                    entry["reply"] = item["type"]
                    model.record(entry)
                    return self._responses(item)
                model.record(entry)
                self._json(404, {"error": {"type": "not_found_error", "message": path}})

            def _anthropic(self, body: dict[str, Any], stop: str,
                           content: list[dict[str, Any]]) -> None:
                msg_id = _next_id("msg")
                usage = {"input_tokens": 100, "output_tokens": 20,
                         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
                model_name = body.get("model", "claude-fake")
                if not body.get("stream"):
                    return self._json(200, {
                        "id": msg_id, "type": "message", "role": "assistant",
                        "model": model_name, "content": content, "stop_reason": stop,
                        "stop_sequence": None, "usage": usage})
                events: list[tuple[str | None, dict[str, Any]]] = [("message_start", {
                    "type": "message_start",
                    "message": {"id": msg_id, "type": "message", "role": "assistant",
                                "model": model_name, "content": [], "stop_reason": None,
                                "stop_sequence": None,
                                "usage": dict(usage, output_tokens=1)}})]
                for index, block in enumerate(content):
                    if block["type"] == "tool_use":
                        start = dict(block, input={})
                        delta = {"type": "input_json_delta",
                                 "partial_json": json.dumps(block["input"])}
                    else:
                        start = {"type": "text", "text": ""}
                        delta = {"type": "text_delta", "text": block["text"]}
                    events.append(("content_block_start", {
                        "type": "content_block_start", "index": index,
                        "content_block": start}))
                    events.append(("content_block_delta", {
                        "type": "content_block_delta", "index": index, "delta": delta}))
                    events.append(("content_block_stop", {
                        "type": "content_block_stop", "index": index}))
                events.append(("message_delta", {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 20}}))
                events.append(("message_stop", {"type": "message_stop"}))
                self._sse(events)

            def _responses(self, item: dict[str, Any]) -> None:
                resp_id = _next_id("resp")
                usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                         "output_tokens": 20,
                         "output_tokens_details": {"reasoning_tokens": 0},
                         "total_tokens": 120}
                base = {"id": resp_id, "object": "response", "status": "in_progress",
                        "output": []}
                self._sse([
                    ("response.created", {"type": "response.created", "response": base}),
                    ("response.output_item.added", {
                        "type": "response.output_item.added", "output_index": 0,
                        "item": item}),
                    ("response.output_item.done", {
                        "type": "response.output_item.done", "output_index": 0,
                        "item": item}),
                    ("response.completed", {
                        "type": "response.completed",
                        "response": dict(base, status="completed", output=[item],
                                         usage=usage)}),
                ])

        return Handler


if __name__ == "__main__":  # a manual run: print the URL and serve until interrupted
    import sys

    calls = json.loads(sys.argv[1]) if len(sys.argv) > 1 else []
    with FakeModel(calls if isinstance(calls, list) else [calls], log_path=sys.argv[2] if len(sys.argv) > 2 else None) as fake:
        print(fake.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
