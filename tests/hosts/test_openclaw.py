"""The real OpenClaw (pinned, from npm) approving its exec calls through `agentnotify openclaw
watch`, offline: a loopback Gateway, a scripted `openai-completions` model, our broker.

    OPENCLAW_BIN=… OPENCLAW_NODE_DIR=… python3 tests/hosts/test_openclaw.py [Class.test]

(`tests/hosts/run.sh` installs OpenClaw and sets both.) One Gateway serves the whole class;
each test gets its own agentnotify home, workspace and victim folder. The model always
answers the first turn with an `exec` tool call that deletes the victim folder, so whether
the folder survives says what OpenClaw did.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hostlib import AGENTNOTIFY, KEEP, BrokerCli, wait_for  # noqa: E402

OPENCLAW = os.environ.get("OPENCLAW_BIN") or ""
NODE_DIR = os.environ.get("OPENCLAW_NODE_DIR") or ""
TOKEN = "gateway-test-token"
TURN_LIMIT = 120      # seconds one agent turn may take
QUESTION_LIMIT = 90   # seconds until the watcher's question appears
INTERNAL = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeModel:
    """An OpenAI chat-completions server: the first reply of a turn is an `exec` call of
    `command`, the reply after its tool result is "done". OpenClaw appends an internal
    context message after tool results, so the turn is keyed on the last user message
    that is not internal."""

    def __init__(self) -> None:
        self.command = "true"
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
                self.reply(200, "application/json", body.encode())

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)) or 0)
                body = json.loads(raw or b"{}")
                self.reply_chat(body, model.next_message(body.get("messages", [])))

            def reply(self, status: int, ctype: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def reply_chat(self, body: dict[str, Any], msg: dict[str, Any]) -> None:
                finish = "tool_calls" if msg.get("tool_calls") else "stop"
                base = {"id": "c1", "created": 0, "model": body.get("model")}
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                if not body.get("stream"):
                    data = {**base, "object": "chat.completion", "usage": usage,
                            "choices": [{"index": 0, "message": msg, "finish_reason": finish}]}
                    self.reply(200, "application/json", json.dumps(data).encode())
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                delta: dict[str, Any] = {"role": "assistant"}
                if msg.get("content"):
                    delta["content"] = msg["content"]
                if msg.get("tool_calls"):
                    delta["tool_calls"] = [dict(msg["tool_calls"][0], index=0)]
                chunk = {**base, "object": "chat.completion.chunk"}
                for event in (
                    {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                    {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                    {**chunk, "choices": [], "usage": usage},
                ):
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def next_message(self, msgs: list[dict[str, Any]]) -> dict[str, Any]:
        def text(m: dict[str, Any]) -> str:
            c = m.get("content")
            if isinstance(c, list):
                return " ".join(x.get("text", "") for x in c if isinstance(x, dict))
            return c or ""
        users = [i for i, m in enumerate(msgs) if m.get("role") == "user" and not text(m).startswith(INTERNAL)]
        start = users[-1] if users else -1
        if any(m.get("role") == "tool" for m in msgs[start + 1:]):
            return {"role": "assistant", "content": "done"}
        call = {"id": "call_1", "type": "function",
                "function": {"name": "exec", "arguments": json.dumps({"command": self.command})}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    def close(self) -> None:
        self.server.shutdown()


class Gateway:
    """`openclaw gateway run` on a free loopback port with token auth, exec set to ask
    always and deny when nobody answers (OpenClaw's own safe default)."""

    def __init__(self, root: Path, model: FakeModel) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        for d in ("home", "state", "work"):
            (root / d).mkdir(exist_ok=True)
        self.config = root / "openclaw.json"
        fake = {"id": "fake-model", "name": "Fake", "reasoning": False, "input": ["text"],
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                "contextWindow": 128000, "maxTokens": 4096}
        self.config.write_text(json.dumps({
            "gateway": {"mode": "local", "port": self.port, "bind": "loopback",
                        "auth": {"mode": "token", "token": TOKEN}},
            "agents": {"defaults": {"model": {"primary": "fake/fake-model"},
                                    "workspace": str(root / "work")}},
            "models": {"mode": "merge", "providers": {"fake": {
                "baseUrl": f"http://127.0.0.1:{model.port}/v1", "apiKey": "sk-local",
                "api": "openai-completions", "models": [fake]}}},
            "tools": {"exec": {"host": "gateway", "security": "full", "ask": "always"}},
        }, indent=2))
        self.env = {
            "PATH": f"{NODE_DIR}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "LANG": "C.UTF-8",
            "HOME": str(root / "home"),
            "TMPDIR": str(root),
            "OPENCLAW_STATE_DIR": str(root / "state"),
            "OPENCLAW_CONFIG_PATH": str(self.config),
            "OPENCLAW_GATEWAY_TOKEN": TOKEN,
            "OPENCLAW_SKIP_CHANNELS": "1",
        }
        self.run_cli("exec-policy", "set", "--host", "gateway", "--security", "full",
                     "--ask", "always", "--ask-fallback", "deny", "--json")
        self.proc: subprocess.Popen[Any] | None = None
        self.start()

    def run_cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([OPENCLAW, *args], env=self.env, capture_output=True, text=True,
                              timeout=TURN_LIMIT, check=check)

    def start(self) -> None:
        with open(self.root / "gateway.log", "a") as log:
            self.proc = subprocess.Popen(
                [OPENCLAW, "gateway", "run", "--port", str(self.port), "--bind", "loopback",
                 "--auth", "token", "--token", TOKEN],
                env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        wait_for("the Gateway to be ready", lambda: "[gateway] ready" in self.log(), 90)

    def log(self) -> str:
        """The Gateway's console output without its colours."""
        return re.sub(r"\x1b\[[0-9;]*m", "", (self.root / "gateway.log").read_text(errors="replace"))

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None


class World(BrokerCli):
    """One test: its agentnotify home, broker, watcher and victim folder."""

    def __init__(self, test: unittest.TestCase, gateway: Gateway) -> None:
        self.gateway = gateway
        self.root = Path(tempfile.mkdtemp(prefix="agentnotify-openclaw-"))
        self.an_home = self.root / "agentnotify"
        self.an_home.mkdir(mode=0o700)
        self.victim = gateway.root / "work" / f"victim-{self.root.name}"
        self.victim.mkdir()
        gateway.model.command = f"rm -rf {self.victim}"
        self.procs: list[subprocess.Popen[Any]] = []
        self.watch: subprocess.Popen[Any] | None = None
        test.addCleanup(self.close)
        self.agentnotify("status")  # starts the broker (ephemeral port)

    def env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
                "HOME": str(self.root), "AGENTNOTIFY_HOME": str(self.an_home),
                "AGENTNOTIFY_PORT": "0"}

    def run(self, exe: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(exe), *args], env=self.env(), capture_output=True,
                              text=True, timeout=60, check=True)

    def agentnotify(self, *args: str) -> str:
        return self.run(AGENTNOTIFY, *args).stdout

    def start_watch(self) -> None:
        env = {**self.env(), "OPENCLAW_GATEWAY_TOKEN": TOKEN}
        with open(self.root / "watch.err", "a") as log:
            self.watch = subprocess.Popen(
                [str(AGENTNOTIFY), "openclaw", "watch", "--url", self.gateway.url],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.procs.append(self.watch)

    def connections(self) -> int:
        path = self.root / "watch.err"
        return path.read_text().count("connected to the OpenClaw Gateway") if path.exists() else 0

    def stop_watch(self) -> None:
        assert self.watch is not None
        self.watch.send_signal(signal.SIGTERM)
        self.watch.wait(timeout=10)

    def turn(self) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [OPENCLAW, "agent", "--agent", "main", "--message", "Clean up the victim folder.", "--json"],
            env=self.gateway.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.procs.append(proc)
        return proc

    def finish(self, proc: subprocess.Popen[str]) -> str:
        out, _ = proc.communicate(timeout=TURN_LIMIT)
        return out

    def pending(self) -> list[dict[str, Any]]:
        return self.interactions("--pending")

    def question(self) -> dict[str, Any]:
        return wait_for("the watcher's question",
                        lambda: next((q for q in self.pending() if (q.get("key") or "").startswith("openclaw:")), None),
                        QUESTION_LIMIT)

    def answer(self, q: dict[str, Any], choice: str) -> None:
        self.agentnotify("answer", q["id"], "--choice", choice)

    def record(self, item_id: str) -> dict[str, Any]:
        return json.loads(self.agentnotify("interactions", "get", item_id))

    def wait_settled(self, item_id: str) -> dict[str, Any]:
        return json.loads(self.agentnotify("interactions", "wait", item_id, "--timeout", "30"))

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL) if p is not self.watch else p.kill()
                except (ProcessLookupError, PermissionError):
                    p.kill()
                p.wait()
        self.kill_broker()
        if not KEEP:
            shutil.rmtree(self.root, ignore_errors=True)


class OpenClawTests(unittest.TestCase):
    gateway: Gateway
    root: Path

    @classmethod
    def setUpClass(cls) -> None:
        if not (OPENCLAW and NODE_DIR and AGENTNOTIFY.exists()):
            raise unittest.SkipTest("OPENCLAW_BIN / OPENCLAW_NODE_DIR not set (tests/hosts/run.sh sets them)")
        cls.root = Path(tempfile.mkdtemp(prefix="agentnotify-openclaw-gw-"))
        model = FakeModel()
        cls.gateway = Gateway(cls.root, model)
        cls.gateway.model = model  # type: ignore[attr-defined]

    @classmethod
    def tearDownClass(cls) -> None:
        cls.gateway.stop()
        cls.gateway.model.close()  # type: ignore[attr-defined]
        if not KEEP:
            shutil.rmtree(cls.root, ignore_errors=True)

    def world(self) -> World:
        w = World(self, self.gateway)
        w.start_watch()
        wait_for("the watcher to connect", lambda: w.connections() >= 1, 30)
        return w

    def test_allow_once_runs_the_command(self) -> None:
        w = self.world()
        turn = w.turn()
        q = w.question()
        self.assertEqual([c["id"] for c in q["choices"]], ["allow-once", "deny"],
                         "ask=always: OpenClaw allows only these two")
        self.assertEqual(q["body"], f"rm -rf {w.victim}")
        started = time.monotonic()
        w.answer(q, "allow-once")
        out = w.finish(turn)
        self.assertFalse(w.victim.exists(), f"the command ran\n{out[-2000:]}")
        print(f"  allow-once -> command ran, turn ended {time.monotonic() - started:.1f} s after the answer")

    def test_deny_blocks_the_command(self) -> None:
        w = self.world()
        turn = w.turn()
        w.answer(w.question(), "deny")
        out = w.finish(turn)
        self.assertTrue(w.victim.exists(), f"denied: the folder stays\n{out[-2000:]}")

    def test_resolved_in_openclaw_is_withdrawn_at_the_broker(self) -> None:
        w = self.world()
        turn = w.turn()
        q = w.question()
        approval_id = q["native_request_id"]
        done = self.gateway.run_cli("approvals", "resolve", approval_id, "deny")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertEqual(w.wait_settled(q["id"])["status"], "cancelled")
        w.finish(turn)
        self.assertTrue(w.victim.exists())

    def test_watch_restart_backfills_and_the_answer_still_counts(self) -> None:
        w = self.world()
        turn = w.turn()
        q = w.question()
        w.stop_watch()
        # Pending in OpenClaw while no watcher runs; the new one finds it by listing.
        w.start_watch()
        wait_for("the new watcher to connect", lambda: w.connections() >= 2, 30)
        self.assertEqual(w.question()["id"], q["id"], "the same question, not a second one")
        w.answer(q, "allow-once")
        w.finish(turn)
        self.assertFalse(w.victim.exists())

    def test_broker_killed_mid_wait_the_watcher_recovers(self) -> None:
        w = self.world()
        turn = w.turn()
        q = w.question()
        old = w.broker_pid()
        assert old is not None
        os.kill(old, signal.SIGKILL)
        # The watcher starts a broker of its own and waits on the same record there.
        wait_for("a new broker", lambda: w.broker_pid() not in (None, old), 30)
        w.answer(q, "allow-once")
        w.finish(turn)
        self.assertFalse(w.victim.exists())

    def test_gateway_restart_reconnects(self) -> None:
        w = self.world()
        self.gateway.stop()
        self.gateway.start()
        wait_for("the watcher to reconnect", lambda: w.connections() >= 2, 60)
        turn = w.turn()
        w.answer(w.question(), "allow-once")
        w.finish(turn)
        self.assertFalse(w.victim.exists())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *sys.argv[1:]], verbosity=2)
