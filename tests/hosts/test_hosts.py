"""Host fidelity: the real Claude Code and Codex drive our hook.

Each test builds a throwaway world (HOME, CODEX_HOME, AGENTNOTIFY_HOME, a project folder),
starts a scripted fake model on 127.0.0.1 (fakemodel.py), installs our hook with the real
`agentnotify-hook install-harness`, runs the real host against the fake, and answers the
question remotely with the real `agentnotify interactions` CLI. It then checks the world (a
marker file) and what the host sent back to the model.

Run through run.sh (which installs the pinned hosts), or directly:

    AGENTNOTIFY_BIN_DIR=target/debug CLAUDE_BIN=… CODEX_BIN=… python3 tests/hosts/test_hosts.py

Environment:
    AGENTNOTIFY_BIN_DIR  folder with `agentnotify` and `agentnotify-hook` (default target/debug)
    CLAUDE_BIN, CODEX_BIN  the host executables (run.sh sets them; required otherwise)
    AGENTNOTIFY_HOST_TESTS=0  skip the whole suite (says so); anything else runs it and a
                          missing host or binary is a failure, not a skip
    HOSTS_KEEP=1          keep each test's folder (printed) for a post-mortem
    HOSTS_TUI=0           skip the Claude and Codex TUI cases (they need tmux)

Stdlib only. Ends with one line `hosts: N passed, N failed[, N skipped]`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
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

from fakemodel import FakeModel  # noqa: E402
from hostlib import (  # noqa: E402
    AGENTNOTIFY, BIN_DIR, HOOK, KEEP, MARKER_CMD, BrokerCli, broker_env, pid_alive, wait_for,
)

CLAUDE = os.environ.get("CLAUDE_BIN") or ""
CODEX = os.environ.get("CODEX_BIN") or ""

DENY_MESSAGE = "Denied via agentnotify"
HOST_RUN_LIMIT = 90      # seconds one host run may take before the test fails
QUESTION_LIMIT = 45      # seconds to wait for the hook's question to appear

# Outside connection attempts the hosts made (refused by the fake proxy), for the summary.
OUTSIDE: list[str] = []


class World(BrokerCli):
    """One test's sandbox: folders, the fake model, our CLI, the host's environment."""

    def __init__(self, test: unittest.TestCase, script: list[dict[str, Any]],
                 review: str = "allow"):
        self.test = test
        self.root = Path(tempfile.mkdtemp(prefix="agentnotify-hosts-"))
        self.home = self.root / "home"
        self.codex_home = self.root / "codex-home"
        self.an_home = self.root / "agentnotify"
        self.proj = self.root / "shop"
        for d in (self.home, self.codex_home, self.an_home, self.proj):
            d.mkdir()
        self.fake = FakeModel(script, log_path=str(self.root / "model.jsonl"), review=review)
        self.fake.__enter__()
        self.tmux_socket: str | None = None
        self.answered: set[str] = set()
        self.procs: list[subprocess.Popen[Any]] = []
        self.files: list[Any] = []
        test.addCleanup(self.close)

    # ---- environment -----------------------------------------------------------------

    def base_env(self) -> dict[str, str]:
        """A clean environment: nothing of the real user's home or credentials."""
        env = broker_env(self.home, self.root, self.an_home)
        if os.environ.get("RUST_BACKTRACE"):
            env["RUST_BACKTRACE"] = os.environ["RUST_BACKTRACE"]
        return env

    def host_env(self) -> dict[str, str]:
        """The hosts' environment: only loopback traffic. The model is the fake; so is
        every proxy, so an attempt to reach anything else is refused and logged."""
        env = self.base_env()
        url = self.fake.url
        env.update({
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-host-tests",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CODEX_HOME": str(self.codex_home),
            "FAKE_MODEL_API_KEY": "sk-fake-host-tests",
            "HTTPS_PROXY": url, "HTTP_PROXY": url, "ALL_PROXY": url,
            "https_proxy": url, "http_proxy": url, "all_proxy": url,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        })
        return env

    def write_codex_config(self) -> None:
        """CODEX_HOME/config.toml: the fake as a Responses provider, nothing optional."""
        (self.codex_home / "config.toml").write_text(f"""\
model = "gpt-5.4"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{self.fake.url}/v1"
wire_api = "responses"
env_key = "FAKE_MODEL_API_KEY"

[features]
plugins = false

[analytics]
enabled = false

[projects."{self.proj}"]
trust_level = "trusted"
""")

    # ---- our binaries ----------------------------------------------------------------

    def run(self, exe: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = self.base_env()
        env["CODEX_HOME"] = str(self.codex_home)
        r = subprocess.run([str(exe), *args], env=env, cwd=self.proj, capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"{exe.name} {' '.join(args)} exited {r.returncode}: "
                                 f"{r.stderr.strip()}")
        return r

    def install(self, host: str, *extra: str) -> str:
        r = self.run(HOOK, "install-harness", host, "--ask", "--command-path", str(HOOK), *extra)
        return r.stdout

    def notifications(self) -> list[dict[str, Any]]:
        r = self.run(AGENTNOTIFY, "notify", "list", "--json")
        return json.loads(r.stdout)["notifications"]

    def finished_notification(self, title: str) -> dict[str, Any]:
        """Waits for the notify hook's notification (posted by a detached child)."""
        def probe() -> dict[str, Any] | None:
            if self.broker_pid() is None:
                return None
            found = [n for n in self.notifications() if n["title"] == title]
            return found[0] if found else None

        return wait_for(f"the notification {title!r}", probe, QUESTION_LIMIT, 0.2)

    def broker_pid(self) -> int | None:
        """The broker's pid while it runs."""
        pid = super().broker_pid()
        return pid if pid is not None and pid_alive(pid) else None

    def start_broker(self) -> int:
        """A warm broker, started on demand by our CLI before the host runs."""
        self.run(AGENTNOTIFY, "interactions", "list")
        return wait_for("the broker", self.broker_pid, 10)

    def question(self, host_proc: subprocess.Popen[Any] | None = None) -> dict[str, Any]:
        """Waits until a question this test has not answered yet is pending; returns it."""
        def probe() -> dict[str, Any] | None:
            if host_proc is not None and host_proc.poll() is not None:
                raise AssertionError(f"the host exited ({host_proc.returncode}) before "
                                     f"asking: {self.tail()}")
            return self.unanswered()

        return wait_for("the hook's question", probe, QUESTION_LIMIT, 0.2)

    # ---- hosts -----------------------------------------------------------------------

    def spawn(self, argv: list[str], name: str, **kw: Any) -> subprocess.Popen[Any]:
        out = open(self.root / f"{name}.out", "w")
        err = open(self.root / f"{name}.err", "w")
        self.files += [out, err]
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", out)
        proc = subprocess.Popen(argv, cwd=self.proj, env=self.host_env(), stderr=err,
                                start_new_session=True, **kw)
        self.procs.append(proc)
        return proc

    def claude_print(self, prompt: str = "Please do the task.") -> subprocess.Popen[Any]:
        return self.spawn([CLAUDE, "-p", prompt, "--permission-mode", "default"], "claude")

    def codex_exec(self, prompt: str = "Please do the task.") -> subprocess.Popen[Any]:
        return self.spawn([CODEX, "exec", "--approve-for-me", "--skip-git-repo-check", prompt],
                          "codex")

    def finish(self, proc: subprocess.Popen[Any]) -> int:
        try:
            return proc.wait(timeout=HOST_RUN_LIMIT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the host did not finish in {HOST_RUN_LIMIT} s: "
                                 f"{self.tail()}") from None

    def tail(self) -> str:
        parts = []
        for f in sorted(self.root.glob("*.err")) + sorted(self.root.glob("*.out")):
            text = f.read_text(errors="replace").strip()
            if text:
                parts.append(f"[{f.name}] {text[-1500:]}")
        return "\n".join(parts) or "(no host output)"

    def seed_claude_tui(self) -> None:
        """HOME/.claude.json as after Claude's first-run screens: onboarding done (it would
        check the network), the project trusted, the fake API key approved."""
        key = self.host_env()["ANTHROPIC_API_KEY"]
        (self.home / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True,
            "theme": "dark",
            "projects": {str(self.proj): {"hasTrustDialogAccepted": True,
                                          "hasCompletedProjectOnboarding": True}},
            "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
        }))

    # ---- tmux (Claude and Codex TUIs) ------------------------------------------------

    def tui(self, argv: list[str]) -> None:
        self.tmux_socket = f"agentnotify-hosts-{os.getpid()}-{id(self)}"
        script = self.root / "tui.sh"
        env = self.host_env()
        env["TERM"] = "xterm-256color"
        exports = "".join(f"export {k}={shell_quote(v)}\n" for k, v in env.items())
        script.write_text(f"{exports}cd {shell_quote(str(self.proj))}\n"
                          f"exec {' '.join(shell_quote(a) for a in argv)} "
                          f"2>{shell_quote(str(self.root / 'tui.err'))}\n")
        subprocess.run(["tmux", "-L", self.tmux_socket, "-f", "/dev/null", "new-session",
                        "-d", "-s", "host", "-x", "160", "-y", "45", f"bash {script}"],
                       check=True, env={**os.environ, "TMUX": ""})

    def screen(self) -> str:
        assert self.tmux_socket
        r = subprocess.run(["tmux", "-L", self.tmux_socket, "capture-pane", "-p", "-t", "host"],
                           capture_output=True, text=True)
        return r.stdout

    def keys(self, *keys: str) -> None:
        assert self.tmux_socket
        subprocess.run(["tmux", "-L", self.tmux_socket, "send-keys", "-t", "host", *keys],
                       check=True)

    # ---- teardown --------------------------------------------------------------------

    def kill_strays(self) -> None:
        """Kills (by pid) every process this test left behind: those running an executable
        from its folder (Codex runs its app-server daemon from a copy in CODEX_HOME) or
        carrying its unique AGENTNOTIFY_HOME in their environment (anything a host started)."""
        root = str(self.root) + os.sep
        mark = f"AGENTNOTIFY_HOME={self.an_home}".encode()

        def sweep() -> bool:
            found = False
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) == os.getpid():
                    continue
                try:
                    exe = os.readlink(entry / "exe")
                    environ = (entry / "environ").read_bytes().split(b"\0")
                except OSError:
                    continue
                if exe.startswith(root) or mark in environ:
                    found = True
                    try:
                        os.kill(int(entry.name), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            return found

        # Repeat until a sweep finds nothing: a dying daemon may have just forked.
        for _ in range(20):
            if not sweep():
                return
            time.sleep(0.1)

    def close(self) -> None:
        try:
            for proc in self.procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                for stream in (proc.stdin, proc.stdout):
                    if stream:
                        stream.close()
            for f in self.files:
                f.close()
            if self.tmux_socket:
                subprocess.run(["tmux", "-L", self.tmux_socket, "kill-server"],
                               capture_output=True, timeout=10)
            pid = self.broker_pid()
            if pid:
                os.kill(pid, signal.SIGTERM)
                try:
                    wait_for("the broker to stop", lambda: not pid_alive(pid), 5)
                except AssertionError:
                    os.kill(pid, signal.SIGKILL)
        finally:
            # Whatever else failed: nothing of this test keeps running (the Codex TUI, for
            # one, starts an app-server daemon that outlives it).
            self.kill_strays()
            self.fake.__exit__(None, None, None)
            OUTSIDE.extend(f"{self.test.id().rsplit('.', 1)[-1]}: {r}"
                           for r in self.fake.refused)
            if KEEP:
                print(f"\n  kept {self.root}", file=sys.stderr)
            else:
                shutil.rmtree(self.root, ignore_errors=True)


def shell_quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def bash(command: str, description: str = "Create the marker file") -> dict[str, Any]:
    return {"name": "Bash", "input": {"command": command, "description": description}}


def exec_command(command: str = MARKER_CMD) -> dict[str, Any]:
    return {"name": "exec_command", "arguments": {
        "cmd": command, "sandbox_permissions": "require_escalated",
        "justification": "Allow the fake model to run this command?"}}


def write_then_edit(file: Path) -> list[dict[str, Any]]:
    """Claude writes a new file, then edits it."""
    return [
        {"name": "Write", "input": {"file_path": str(file), "content": "total = 0\n"}},
        {"name": "Edit", "input": {"file_path": str(file), "old_string": "total = 0",
                                   "new_string": "total = 42", "replace_all": False}},
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content", block.get("output"))
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict))
    return str(content)


class HostTest(unittest.TestCase):
    host = ""

    def setUp(self) -> None:
        if self.host == "claude" and not CLAUDE:
            self.fail("CLAUDE_BIN is not set: run tests/hosts/run.sh, which installs the hosts")
        if self.host == "codex" and not CODEX:
            self.fail("CODEX_BIN is not set: run tests/hosts/run.sh, which installs the hosts")
        for exe in (AGENTNOTIFY, HOOK):
            if not os.access(exe, os.X_OK):
                self.fail(f"{exe} is missing: build first (cargo build), or set "
                          "AGENTNOTIFY_BIN_DIR")


# ======================================================================================
# Claude Code
# ======================================================================================

class ClaudeTests(HostTest):
    host = "claude"

    def one_result(self, w: World) -> dict[str, Any]:
        results = w.fake.anthropic_tool_results()
        self.assertEqual(len(results), 1, f"tool results sent to the model: {results}")
        return results[0]

    def test_stop_fires_our_notify_hook_and_changes_nothing_claude_does(self) -> None:
        w = World(self, [bash(MARKER_CMD)])
        out = w.install("claude", "--notify")
        self.assertIn("notify hooks (Stop, SubagentStop, Notification, SessionEnd)", out)
        w.start_broker()
        claude = w.claude_print()
        w.respond(w.question(claude), "allow-once")
        self.assertEqual(w.finish(claude), 0, w.tail())
        # The run went as it would without the notify hooks: the command ran, the model's
        # final text is Claude's output, and the one tool result is the command's.
        self.assertEqual((w.proj / "marker.txt").read_text(), "ran\n")
        self.assertIn("All done.", (w.root / "claude.out").read_text())
        self.assertEqual(len(w.fake.anthropic_tool_results()), 1)
        n = w.finished_notification("Claude finished in shop")
        self.assertEqual((n["type"], n["agent"], n["project"]), ("completed", "claude", "shop"))
        self.assertIn(n["metadata"]["event"], ("Stop", "SessionEnd"))

    def test_allow_runs_the_command(self) -> None:
        w = World(self, [bash(MARKER_CMD)])
        w.install("claude")
        broker = w.start_broker()
        claude = w.claude_print()
        q = w.question(claude)
        self.assertEqual((q["agent"], q["kind"], q["project"]), ("claude", "permission", "shop"))
        self.assertEqual(q["prompt"], "Run a command in shop? — Create the marker file")
        self.assertEqual(q["body"], MARKER_CMD, "the body is exactly what runs")
        self.assertEqual([c["id"] for c in q["choices"]], ["allow-once", "allow-always", "deny"],
                         "Claude sends permission_suggestions, so Always allow is offered")
        w.respond(q, "allow-once")
        self.assertEqual(w.finish(claude), 0, w.tail())
        self.assertEqual((w.proj / "marker.txt").read_text(), "ran\n")
        result = self.one_result(w)
        self.assertFalse(result.get("is_error"), result)
        self.assertNotIn("denied", result_text(result).lower())
        self.assertEqual(w.broker_pid(), broker, "the hook attached to the running broker")
        self.assertEqual(w.status_of(q["id"]), "answered")

    def test_deny_blocks_the_command_and_the_model_sees_our_message(self) -> None:
        w = World(self, [bash(MARKER_CMD)])
        w.install("claude")
        w.start_broker()
        claude = w.claude_print()
        w.respond(w.question(claude), "deny")
        self.assertEqual(w.finish(claude), 0, w.tail())
        self.assertFalse((w.proj / "marker.txt").exists(), "a denied command must not run")
        result = self.one_result(w)
        self.assertTrue(result.get("is_error"), result)
        self.assertIn(DENY_MESSAGE, result_text(result))

    def test_cancel_falls_back_to_print_mode_deny(self) -> None:
        """No decision from us: Claude in print mode has no dialog, so it denies by itself."""
        w = World(self, [bash(MARKER_CMD)])
        w.install("claude")
        w.start_broker()
        claude = w.claude_print()
        q = w.question(claude)
        w.run(AGENTNOTIFY, "interactions", "cancel", q["id"])
        self.assertEqual(w.finish(claude), 0, w.tail())
        self.assertFalse((w.proj / "marker.txt").exists())
        result = self.one_result(w)
        self.assertTrue(result.get("is_error"), result)
        self.assertNotIn(DENY_MESSAGE, result_text(result),
                         "the hook must stay silent: the refusal is Claude's own")
        self.assertEqual(w.status_of(q["id"]), "cancelled")

    def test_budget_end_falls_back_and_withdraws_the_question(self) -> None:
        w = World(self, [bash(MARKER_CMD)])
        w.install("claude", "--timeout", "2")
        w.start_broker()
        claude = w.claude_print()
        q = w.question(claude)
        self.assertEqual(w.finish(claude), 0, w.tail())
        self.assertFalse((w.proj / "marker.txt").exists())
        result = self.one_result(w)
        self.assertTrue(result.get("is_error"), result)
        self.assertNotIn(DENY_MESSAGE, result_text(result))
        self.assertEqual(w.status_of(q["id"]), "cancelled",
                         "the hook withdraws its question when its budget ends")

    def test_cold_start_allow_is_honoured(self) -> None:
        """No broker running: the hook starts one. Claude refuses an allow from a hook whose
        child still holds its stdout, so this fails if the broker inherits the hook's stdio."""
        w = World(self, [bash(MARKER_CMD)])
        w.install("claude")
        self.assertIsNone(w.broker_pid())
        claude = w.claude_print()
        # Touch nothing that could start a broker until the hook has started one.
        broker = wait_for("the hook to start the broker", w.broker_pid, QUESTION_LIMIT)
        w.respond(w.question(claude), "allow-once")
        self.assertEqual(w.finish(claude), 0, w.tail())
        result = self.one_result(w)
        self.assertTrue((w.proj / "marker.txt").exists(),
                        f"allow from a cold start was not honoured; the model got: {result}")
        self.assertFalse(result.get("is_error"), result)
        self.assertTrue(pid_alive(broker), "the broker the hook started outlives the hook")

    def write_then_edit_world(self, path: str) -> tuple[World, subprocess.Popen[Any]]:
        """Claude in print mode, scripted to write `path` and then edit it."""
        w = World(self, [])
        w.fake.script = write_then_edit(w.proj / path)
        w.install("claude")
        w.start_broker()
        return w, w.claude_print()

    def test_write_then_edit(self) -> None:
        path = "notes.txt"
        w, claude = self.write_then_edit_world(path)
        write_q = w.question(claude)
        self.assertEqual(write_q["prompt"], f"Write {w.proj}/{path} (1 lines)?")
        self.assertEqual(write_q["body"], "total = 0\n", "the whole content")
        w.respond(write_q, "allow-once")
        edit_q = w.question(claude)
        self.assertEqual(edit_q["prompt"], f"Edit {w.proj}/{path}?")
        self.assertEqual(edit_q["body"], "replace_all: false (one occurrence is replaced)\n"
                         f"--- {w.proj}/{path}\n+++ {w.proj}/{path}\n"
                         "@@ -1 +1 @@\n-total = 0\n+total = 42\n")
        w.respond(edit_q, "allow-once")
        self.assertEqual(w.finish(claude), 0, w.tail())
        self.assertEqual((w.proj / path).read_text(), "total = 42\n")
        results = w.fake.anthropic_tool_results()
        self.assertEqual(len(results), 2, results)
        self.assertFalse(any(r.get("is_error") for r in results), results)

    def test_always_allow_is_remembered_by_claude(self) -> None:
        """`allow-always` echoes Claude's own permission suggestions back as
        updatedPermissions; Claude applies them, so the next edit is not asked at all."""
        path = "notes.txt"
        w, claude = self.write_then_edit_world(path)
        q = w.question(claude)
        always = next(c for c in q["choices"] if c["id"] == "allow-always")
        self.assertIn("acceptEdits", always["detail"])
        w.respond(q, "allow-always")
        wait_for("Claude to finish, or to ask again",
                 lambda: claude.poll() is not None or len(w.interactions()) > 1,
                 HOST_RUN_LIMIT, 0.2)
        self.assertEqual([i["id"] for i in w.interactions()], [q["id"]],
                         "the edit after 'Always allow' was asked again")
        self.assertEqual(w.finish(claude), 0, w.tail())
        self.assertEqual((w.proj / path).read_text(), "total = 42\n")

    def test_ask_user_question_answered_remotely_in_a_stream_json_host(self) -> None:
        """An SDK-style host (stream-json, --permission-prompt-tool stdio) shows its own
        prompt as a control request; the hook's remote answer wins and the model gets the
        chosen label."""
        question = "Which color should the proof file be?"
        w = World(self, [{"name": "AskUserQuestion", "input": {"questions": [{
            "question": question, "header": "Color", "multiSelect": False,
            "options": [{"label": "Red", "description": "A warm color"},
                        {"label": "Blue", "description": "A cool color"}]}]}}])
        w.install("claude")
        w.start_broker()
        claude = w.spawn([CLAUDE, "-p", "--input-format", "stream-json", "--output-format",
                          "stream-json", "--verbose", "--permission-mode", "default",
                          "--permission-prompt-tool", "stdio"], "claude",
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert claude.stdin and claude.stdout
        claude.stdin.write(json.dumps({"type": "user", "message": {
            "role": "user", "content": "Ask me which color to use."}}) + "\n")
        claude.stdin.flush()
        messages: list[dict[str, Any]] = []

        def read() -> None:
            assert claude.stdout
            for line in claude.stdout:
                try:
                    messages.append(json.loads(line))
                except ValueError:
                    continue
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        q = w.question(claude)
        self.assertEqual(q["kind"], "single_choice")
        self.assertEqual(q["prompt"], f"Color: {question}")
        blue = next(c["id"] for c in q["choices"] if c["label"] == "Blue")
        w.respond(q, blue)
        wait_for("the result message",
                 lambda: any(m.get("type") == "result" for m in messages), HOST_RUN_LIMIT)
        claude.stdin.close()
        self.assertEqual(w.finish(claude), 0, w.tail())
        results = w.fake.anthropic_tool_results()
        self.assertEqual(len(results), 1, results)
        self.assertFalse(results[0].get("is_error"), results)
        self.assertIn(f'"{question}"="Blue"', result_text(results[0]))
        asked = [m["request_id"] for m in messages if m.get("type") == "control_request"
                 and m.get("request", {}).get("subtype") == "can_use_tool"]
        withdrawn = [m["request_id"] for m in messages if m.get("type") ==
                     "control_cancel_request"]
        self.assertTrue(asked, "the SDK host was asked too (its own prompt)")
        self.assertEqual(asked, withdrawn, "the host withdrew its own prompt: the hook won")


# ======================================================================================
# Codex
# ======================================================================================

class CodexTests(HostTest):
    host = "codex"

    def outputs(self, w: World) -> list[str]:
        return [result_text(o) for o in w.fake.responses_outputs()]

    def review_requests(self, w: World) -> list[dict[str, Any]]:
        """Requests of Codex's own automatic approval review (structured output)."""
        return [b for b in w.fake.bodies("/v1/responses")
                if ((b.get("text") or {}).get("format") or {}).get("type") == "json_schema"]

    def world(self, *install: str, review: str = "allow") -> World:
        w = World(self, [exec_command()], review=review)
        w.write_codex_config()
        w.install("codex", *install)
        return w

    def test_exec_stop_fires_our_notify_hook_and_changes_nothing_codex_does(self) -> None:
        w = self.world("--trust", "--notify")
        w.start_broker()
        codex = w.codex_exec()
        w.respond(w.question(codex), "allow-once")
        self.assertEqual(w.finish(codex), 0, w.tail())
        self.assertEqual((w.proj / "marker.txt").read_text(), "ran\n")
        self.assertIn("All done.", (w.root / "codex.out").read_text())
        self.assertEqual(len(self.outputs(w)), 1)
        n = w.finished_notification("Codex finished in shop")
        self.assertEqual((n["type"], n["agent"]), ("completed", "codex"))

    def test_exec_allow_from_a_cold_start(self) -> None:
        w = self.world("--trust")
        self.assertIsNone(w.broker_pid())
        codex = w.codex_exec()
        wait_for("the hook to start the broker", w.broker_pid, QUESTION_LIMIT)
        q = w.question(codex)
        self.assertEqual((q["agent"], q["kind"], q["project"]), ("codex", "permission", "shop"))
        self.assertEqual(q["prompt"], "Run a command in shop? — "
                                      "Allow the fake model to run this command?")
        self.assertEqual(q["body"], MARKER_CMD)
        self.assertEqual([c["id"] for c in q["choices"]], ["allow-once", "deny"])
        self.assertTrue(q["turn_id"], "Codex sends a turn id")
        w.respond(q, "allow-once")
        self.assertEqual(w.finish(codex), 0, w.tail())
        self.assertEqual((w.proj / "marker.txt").read_text(), "ran\n")
        outputs = self.outputs(w)
        self.assertEqual(len(outputs), 1, outputs)
        self.assertIn("exited with code 0", outputs[0])
        self.assertEqual(self.review_requests(w), [], "our allow decided; no review ran")

    def test_exec_deny_blocks_the_command_and_the_model_sees_our_message(self) -> None:
        w = self.world("--trust")
        w.start_broker()
        codex = w.codex_exec()
        w.respond(w.question(codex), "deny")
        self.assertEqual(w.finish(codex), 0, w.tail())
        self.assertFalse((w.proj / "marker.txt").exists())
        outputs = self.outputs(w)
        self.assertEqual(len(outputs), 1, outputs)
        self.assertIn(DENY_MESSAGE, outputs[0])
        self.assertEqual(self.review_requests(w), [])

    def test_exec_budget_end_falls_back_to_codex_review(self) -> None:
        """Silence from the hook is no decision: Codex asks its own reviewer (here the fake
        model, scripted to approve), and the command runs on that say-so."""
        w = self.world("--trust", "--timeout", "2", review="allow")
        w.start_broker()
        codex = w.codex_exec()
        q = w.question(codex)
        self.assertEqual(w.finish(codex), 0, w.tail())
        reviews = self.review_requests(w)
        self.assertEqual(len(reviews), 1, "Codex ran its own approval review")
        self.assertIn(MARKER_CMD, json.dumps(reviews[0]["input"]))
        self.assertEqual((w.proj / "marker.txt").read_text(), "ran\n")
        self.assertNotIn(DENY_MESSAGE, " ".join(self.outputs(w)))
        self.assertEqual(w.status_of(q["id"]), "cancelled")

    def test_exec_cancel_falls_back_to_codex_review(self) -> None:
        w = self.world("--trust", review="deny")
        w.start_broker()
        codex = w.codex_exec()
        q = w.question(codex)
        w.run(AGENTNOTIFY, "interactions", "cancel", q["id"])
        self.assertEqual(w.finish(codex), 0, w.tail())
        self.assertEqual(len(self.review_requests(w)), 1)
        self.assertFalse((w.proj / "marker.txt").exists(), "the review (scripted: deny) said no")
        outputs = " ".join(self.outputs(w))
        self.assertNotIn(DENY_MESSAGE, outputs)
        self.assertIn("scripted review: deny", outputs)

    def test_untrusted_hook_is_skipped_and_doctor_says_so(self) -> None:
        w = self.world(review="deny")  # no --trust
        doctor = w.run(HOOK, "doctor", "codex", "--json", check=False)
        self.assertEqual(doctor.returncode, 1, doctor.stdout)
        trust = [c for c in json.loads(doctor.stdout)["checks"] if "trust" in c]
        self.assertEqual([c["trust"] for c in trust], ["untrusted"], doctor.stdout)
        codex = w.codex_exec()
        self.assertEqual(w.finish(codex), 0, w.tail())
        self.assertEqual(w.interactions(), [], "Codex skips an untrusted hook silently")
        self.assertEqual(len(self.review_requests(w)), 1, "so its own review decided")
        self.assertFalse((w.proj / "marker.txt").exists())
        # Trusting it afterwards is what doctor then reports.
        w.install("codex", "--trust")
        doctor = w.run(HOOK, "doctor", "codex", "--json", check=False)
        trust = [c for c in json.loads(doctor.stdout)["checks"] if "trust" in c]
        self.assertEqual([c["trust"] for c in trust], ["trusted"], doctor.stdout)


@unittest.skipIf(os.environ.get("HOSTS_TUI") == "0", "HOSTS_TUI=0")
class ClaudeTuiTests(HostTest):
    """The interactive Claude under tmux: its own dialog and the hook race."""
    host = "claude"
    DIALOG = "Do you want to proceed?"

    def setUp(self) -> None:
        super().setUp()
        if not shutil.which("tmux"):
            self.fail("tmux is not installed (needed for the TUI cases; HOSTS_TUI=0 skips them)")

    def start(self, script: list[dict[str, Any]] | None = None,
              dialog: str = DIALOG) -> tuple[World, dict[str, Any]]:
        w = World(self, script or [bash(MARKER_CMD)])
        w.install("claude")
        w.start_broker()
        w.seed_claude_tui()
        w.tui([CLAUDE, "--permission-mode", "default", "Please do the task."])
        q = wait_for("the hook's question", lambda: w.interactions("--pending"),
                     QUESTION_LIMIT, 0.2)[0]
        wait_for("Claude's own dialog beside it", lambda: dialog in w.screen(),
                 QUESTION_LIMIT)
        self.assertFalse((w.proj / "marker.txt").exists())
        return w, q

    def test_tui_allow_remotely_closes_claude_dialog(self) -> None:
        w, q = self.start()
        w.respond(q, "allow-once")
        wait_for("the marker", (w.proj / "marker.txt").exists, HOST_RUN_LIMIT)
        wait_for("the turn to end", lambda: "All done." in w.screen(), HOST_RUN_LIMIT)
        self.assertIn("Allowed by PermissionRequest hook", w.screen())
        self.assertNotIn(self.DIALOG, w.screen())

    def test_tui_ask_user_question_answered_remotely(self) -> None:
        question = "Which color should the proof file be?"
        w, q = self.start([{"name": "AskUserQuestion", "input": {"questions": [{
            "question": question, "header": "Color", "multiSelect": False,
            "options": [{"label": "Red", "description": "A warm color"},
                        {"label": "Blue", "description": "A cool color"}]}]}}],
            "A warm color")
        self.assertEqual((q["kind"], q["prompt"]), ("single_choice", f"Color: {question}"))
        self.assertEqual(len(w.interactions("--pending")), 1,
                         "default mode: the PreToolUse hook stayed silent (never both)")
        w.respond(q, next(c["id"] for c in q["choices"] if c["label"] == "Blue"))
        wait_for("the turn to end", lambda: "All done." in w.screen(), HOST_RUN_LIMIT)
        self.assertNotIn("A warm color", w.screen(), "Claude's own question closed")
        results = w.fake.anthropic_tool_results()
        self.assertEqual(len(results), 1, results)
        self.assertIn(f'"{question}"="Blue"', result_text(results[0]))

    # Several questions in one call: a multiSelect with an "Other" text holding `, ` and
    # quotes, and a single choice answered with an "Other" text.
    SEVERAL = [{"name": "AskUserQuestion", "input": {"questions": [
        {"question": "Which checks should run?", "header": "Checks", "multiSelect": True,
         "options": [{"label": "Lint", "description": "fast"},
                     {"label": "Unit, then e2e", "description": "slow"},
                     {"label": "Fuzz", "description": "slower"}]},
        {"question": "Which branch?", "header": "Branch", "multiSelect": False,
         "options": [{"label": "main", "description": "trunk"},
                     {"label": "release", "description": "rel"}]}]}}]
    OTHER = 'Say "hi", ok'

    def several(self, mode: str = "default") -> tuple[World, list[dict[str, Any]]]:
        w = World(self, self.SEVERAL)
        w.install("claude")
        w.start_broker()
        w.seed_claude_tui()
        w.tui([CLAUDE, "--permission-mode", mode, "Please do the task."])
        qs = wait_for("both questions", lambda: len(w.interactions("--pending")) == 2
                      and w.interactions("--pending"), QUESTION_LIMIT, 0.2)
        wait_for("Claude's own dialog", lambda: "Which checks should run?" in w.screen(),
                 QUESTION_LIMIT)
        return w, sorted(qs, key=lambda q: q["prompt"])

    def test_tui_several_questions_multi_select_and_other_answer_as_claudes_dialog(self) -> None:
        """What Claude's own dialog sends the model, and what a remote answer of the same
        choices sends it, are the same text: updatedInput.answers has Claude's format."""
        w, _ = self.several()
        # In Claude's dialog: Fuzz, then Lint, then an Other text; then Other for the branch.
        # After each step's keys, the dialog shows what they did (the line under its cursor;
        # at the end, the review screen) before the next keys go in.
        steps = [
            (["Down", "Down", "Enter"], "❯ 3. [✔] Fuzz"),
            (["Up", "Up", "Enter"], "❯ 1. [✔] Lint"),
            (["Down", "Down", "Down"], "❯ 4. [ ] Type something"),
            (["-l", self.OTHER], f"❯ 4. [✔] {self.OTHER}"),
            (["Down", "Enter"], "❯ 1. main"),
            (["Down", "Down"], "❯ 3. Type something."),
            (["-l", "hotfix/7"], "❯ 3. hotfix/7"),
            (["Enter"], "Submit answers"),
        ]
        for keys, shown in steps:
            w.keys(*keys)
            wait_for(f"Claude's dialog to show {shown!r}", lambda s=shown: s in w.screen(),
                     QUESTION_LIMIT)
        w.keys("Enter")
        wait_for("the turn to end", lambda: "All done." in w.screen(), HOST_RUN_LIMIT)
        dialog = result_text(w.fake.anthropic_tool_results()[0])
        # The order chosen, not the order offered; Other last, quoted as a JSON string.
        self.assertIn('"Which checks should run?"="Fuzz, Lint, "Say \\"hi\\", ok""', dialog)
        wait_for("our questions withdrawn", lambda: w.interactions("--pending") == [],
                 QUESTION_LIMIT, 0.2)

        w, (branch, checks) = self.several()
        self.assertEqual((checks["kind"], checks["allow_other"]), ("multi_choice", True))
        self.assertEqual((checks["min_selections"], checks["max_selections"]), (1, 4))
        self.assertEqual((branch["kind"], branch["allow_other"]), ("single_choice", True))
        ids = {c["label"]: c["id"] for c in checks["choices"]}
        w.respond_with(checks, "--choice-ids", f"{ids['Fuzz']},{ids['Lint']}",
                       "--text", self.OTHER)
        w.respond_with(branch, "--text", "hotfix/7")
        wait_for("the turn to end", lambda: "All done." in w.screen(), HOST_RUN_LIMIT)
        self.assertNotIn("Submit answers", w.screen(), "Claude's own dialog closed")
        remote = result_text(w.fake.anthropic_tool_results()[0])
        self.assertEqual(remote, dialog)

    def test_tui_ask_user_question_outside_default_mode_goes_through_pre_tool_use(self) -> None:
        """In acceptEdits mode Claude offers AskUserQuestion to no PermissionRequest hook;
        the PreToolUse hook asks instead, once per question, and its answer is used."""
        question = "Which color should the proof file be?"
        w = World(self, [{"name": "AskUserQuestion", "input": {"questions": [{
            "question": question, "header": "Color", "multiSelect": False,
            "options": [{"label": "Red", "description": "A warm color"},
                        {"label": "Blue", "description": "A cool color"}]}]}}])
        w.install("claude")
        w.start_broker()
        w.seed_claude_tui()
        w.tui([CLAUDE, "--permission-mode", "acceptEdits", "Please do the task."])
        q = wait_for("the hook's question", lambda: w.interactions("--pending"),
                     QUESTION_LIMIT, 0.2)[0]
        self.assertEqual((q["kind"], q["prompt"]), ("single_choice", f"Color: {question}"))
        w.respond(q, next(c["id"] for c in q["choices"] if c["label"] == "Blue"))
        wait_for("the turn to end", lambda: "All done." in w.screen(), HOST_RUN_LIMIT)
        results = w.fake.anthropic_tool_results()
        self.assertEqual(len(results), 1, results)
        self.assertIn(f'Your questions have been answered: "{question}"="Blue"',
                      result_text(results[0]))
        self.assertEqual(len(w.interactions()), 1, "asked once, never by both paths")
        settings = json.loads((w.home / ".claude" / "settings.json").read_text())
        self.assertEqual(settings["hooks"]["PreToolUse"][0]["matcher"], "AskUserQuestion",
                         "install-harness --ask installed the PreToolUse path")

    def test_tui_answered_in_the_terminal_withdraws_the_question(self) -> None:
        w, q = self.start()
        w.keys("1")  # "Yes" in Claude's own dialog
        wait_for("the marker", (w.proj / "marker.txt").exists, HOST_RUN_LIMIT)
        # Claude neither signals nor waits for the hook; the hook sees the call's result
        # in the transcript and withdraws, so no other surface still shows the question.
        wait_for("the question withdrawn", lambda: w.status_of(q["id"]) == "cancelled",
                 QUESTION_LIMIT, 0.2)
        self.assertEqual(w.interactions("--pending"), [])


@unittest.skipIf(os.environ.get("HOSTS_TUI") == "0", "HOSTS_TUI=0")
class CodexTuiTests(HostTest):
    """The interactive Codex under tmux: its own prompt appears only after the hook returns."""
    host = "codex"

    def setUp(self) -> None:
        super().setUp()
        if not shutil.which("tmux"):
            self.fail("tmux is not installed (needed for the Codex TUI cases; HOSTS_TUI=0 "
                      "skips them)")

    def start(self, *install: str) -> World:
        w = World(self, [exec_command()])
        w.write_codex_config()
        w.install("codex", "--trust", *install)
        w.start_broker()
        w.tui([CODEX, "-a", "on-request", "Please do the task."])
        return w

    def test_tui_allow_remotely(self) -> None:
        w = self.start()
        q = wait_for("the hook's question", lambda: w.interactions("--pending"),
                     QUESTION_LIMIT, 0.2)[0]
        wait_for("the TUI waiting on the hook", lambda: "Running hook" in w.screen(),
                 QUESTION_LIMIT)
        w.respond(q, "allow-once")
        wait_for("the marker", (w.proj / "marker.txt").exists, HOST_RUN_LIMIT)
        wait_for("the turn to end", lambda: "All done." in w.screen(), HOST_RUN_LIMIT)
        self.assertIn("Ran echo ran > marker.txt", w.screen())
        self.assertNotIn("Would you like to run", w.screen())

    def test_tui_budget_end_shows_codex_own_prompt(self) -> None:
        w = self.start("--timeout", "2")
        q = wait_for("the hook's question", lambda: w.interactions("--pending"),
                     QUESTION_LIMIT, 0.2)[0]
        wait_for("Codex's own prompt", lambda: "Would you like to run" in w.screen(),
                 HOST_RUN_LIMIT)
        self.assertEqual(w.status_of(q["id"]), "cancelled")
        self.assertFalse((w.proj / "marker.txt").exists())
        w.keys("y")
        wait_for("the marker", (w.proj / "marker.txt").exists, HOST_RUN_LIMIT)


# ======================================================================================

def main() -> int:
    if os.environ.get("AGENTNOTIFY_HOST_TESTS") == "0":
        print("hosts: SKIPPED the whole host fidelity suite (AGENTNOTIFY_HOST_TESTS=0)")
        return 0
    started = time.monotonic()
    names = sys.argv[1:]
    loader = unittest.TestLoader()
    module = sys.modules[__name__]
    suite = (loader.loadTestsFromNames(names, module) if names
             else loader.loadTestsFromModule(module))
    runner = unittest.TextTestRunner(verbosity=2, descriptions=False, stream=sys.stdout)
    print(f"hosts: claude={CLAUDE or '(unset)'} codex={CODEX or '(unset)'} bin={BIN_DIR}")
    result = runner.run(suite)
    if OUTSIDE:
        print(f"hosts: outside connections attempted and refused ({len(OUTSIDE)}):")
        for line in OUTSIDE:
            print(f"  {line}")
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print(f"hosts: took {time.monotonic() - started:.0f} s")
    tail = f", {skipped} skipped" if skipped else ""
    print(f"hosts: {passed} passed, {failed} failed{tail}")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
