"""Host fidelity for Pi: the real Pi coding agent (npm, pinned) drives our extension and
our RPC wrapper offline.

Each test builds a throwaway world (HOME, PI_CODING_AGENT_DIR, AGENTNOTIFY_HOME, a project
folder), starts a scripted fake chat-completions model (pimodel.py) that asks for one bash
call, runs the real `pi --mode rpc --offline` against it, and plays the person's RPC client
on Pi's stdin/stdout. Questions are answered remotely with the real `agentnotify
interactions` CLI. The world is then checked: did the command run (a marker file), what did
Pi send back to the model, what became of the question at the broker.

Two paths:
* the extension (`harness/pi/agentnotify.ts`, installed by the real `install-harness pi`),
  with Pi run directly: the client's dialog is "Pi's own dialog" racing the broker;
* the wrapper `agentnotify pi -- pi --mode rpc …` with a test extension (`pi_dialogs.ts`)
  that opens every kind of dialog.

Run through pi.sh (which installs both pinned releases and runs this once per release), or
directly with PI_BIN set.
Stdlib only. Ends with one line `pi: N passed, N failed`.
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
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hostlib import (  # noqa: E402
    AGENTNOTIFY, BIN_DIR, HOOK, KEEP, MARKER_CMD, BrokerCli, broker_env, wait_for,
)
from pimodel import PiModel  # noqa: E402

PI = os.environ.get("PI_BIN") or ""
DIALOGS_EXT = HERE / "pi_dialogs.ts"

LIMIT = 60               # seconds any one thing may take before the test fails


class Rpc:
    """The person's RPC client: writes commands to stdin, collects stdout records; waits on
    a condition that each new record signals (no polling)."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        self.proc = proc
        self.records: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.cond = threading.Condition()
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:  # bytes: split on LF only
            with self.cond:
                self.raw.append(line)
                try:
                    self.records.append(json.loads(line))
                except ValueError:
                    pass
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def send(self, record: dict[str, Any]) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(record).encode() + b"\n")
        self.proc.stdin.flush()

    def expect(self, what: str, pred: Callable[[dict[str, Any]], bool],
               limit: float = LIMIT) -> dict[str, Any]:
        deadline = time.monotonic() + limit
        with self.cond:
            while True:
                found = [r for r in self.records if pred(r)]
                if found:
                    return found[0]
                left = deadline - time.monotonic()
                if self.closed or left <= 0:
                    raise AssertionError(f"no {what} from Pi ({'exited' if self.closed else 'timeout'})")
                self.cond.wait(left)

    def ui_request(self, method: str, n: int = 0) -> dict[str, Any]:
        def pred(r: dict[str, Any]) -> bool:
            return r.get("type") == "extension_ui_request" and r.get("method") == method
        self.expect(f"{method} dialog", lambda r: len([x for x in self.records if pred(x)]) > n)
        return [r for r in self.records if pred(r)][n]

    def settled(self) -> dict[str, Any]:
        return self.expect("agent_end", lambda r: r.get("type") == "agent_end")

    def tool_end(self) -> dict[str, Any]:
        return self.expect("tool_execution_end", lambda r: r.get("type") == "tool_execution_end")


class World(BrokerCli):
    def __init__(self, test: unittest.TestCase, script: list[dict[str, Any]]):
        self.test = test
        self.root = Path(tempfile.mkdtemp(prefix="agentnotify-pi-"))
        self.home = self.root / "home"
        self.agent_dir = self.root / "pi-agent"
        self.an_home = self.root / "agentnotify"
        self.proj = self.root / "shop"
        for d in (self.home, self.agent_dir, self.an_home, self.proj):
            d.mkdir()
        self.dialog_log = self.root / "dialogs.jsonl"
        self.model = PiModel(script).__enter__()
        (self.agent_dir / "models.json").write_text(json.dumps(self.model.models_json()))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.answered: set[str] = set()
        test.addCleanup(self.close)

    def env(self, **extra: str) -> dict[str, str]:
        # Anything not for the fake model goes to it as a proxy and is refused.
        url = self.model.url.removesuffix("/v1")
        env = broker_env(self.home, self.root, self.an_home)
        env.update({
            "PI_CODING_AGENT_DIR": str(self.agent_dir),
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
            "PI_DIALOG_LOG": str(self.dialog_log),
            "HTTPS_PROXY": url, "HTTP_PROXY": url, "NO_PROXY": "127.0.0.1,localhost",
        })
        env.update(extra)
        return env

    def run(self, exe: Path, *args: str) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([str(exe), *args], env=self.env(), cwd=self.proj, capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise AssertionError(f"{exe.name} {' '.join(args)} exited {r.returncode}: {r.stderr}")
        return r

    def install(self) -> str:
        return self.run(HOOK, "install-harness", "pi", "--command-path", str(HOOK)).stdout

    def pi_argv(self, *extra: str) -> list[str]:
        return [PI, "--mode", "rpc", "--no-session", "--offline", "--provider", "fake",
                "--model", "fake-model", *extra]

    def start(self, argv: list[str], **env: str) -> Rpc:
        err = open(self.root / "pi.err", "wb")
        proc = subprocess.Popen(argv, cwd=self.proj, env=self.env(**env), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        self.procs.append(proc)
        rpc = Rpc(proc)
        rpc.send({"id": "p1", "type": "prompt", "message": "Please do the task."})
        return rpc

    def question(self) -> dict[str, Any]:
        return wait_for("the broker's question", self.unanswered, LIMIT)

    def becomes(self, item_id: str, status: str) -> None:
        wait_for(f"question {item_id} to be {status}", lambda: self.status_of(item_id) == status,
                 LIMIT)

    def dialogs(self) -> list[dict[str, Any]]:
        if not self.dialog_log.exists():
            return []
        return [json.loads(l) for l in self.dialog_log.read_text().splitlines()]

    def marker(self) -> bool:
        return (self.proj / "marker.txt").exists()

    def tail(self) -> str:
        p = self.root / "pi.err"
        return p.read_text(errors="replace")[-3000:] if p.exists() else ""

    def close(self) -> None:
        try:
            for proc in self.procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                for s in (proc.stdin, proc.stdout):
                    if s:
                        try:
                            s.close()
                        except OSError:
                            pass
            self.kill_broker()
        finally:
            self.model.__exit__(None, None, None)
            if KEEP:
                print(f"\n  kept {self.root}", file=sys.stderr)
            else:
                shutil.rmtree(self.root, ignore_errors=True)


def bash(command: str = MARKER_CMD) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


class PiExtensionTests(unittest.TestCase):
    """`install-harness pi`'s extension in the real Pi; the RPC client plays Pi's dialog."""

    def world(self) -> tuple[World, Rpc]:
        w = World(self, [bash()])
        self.assertIn("Installed the Pi extension", w.install())
        rpc = w.start(w.pi_argv())
        return w, rpc

    def test_allow_from_the_broker_runs_the_tool_and_closes_pis_dialog(self) -> None:
        w, rpc = self.world()
        dialog = rpc.ui_request("select")
        self.assertIn(MARKER_CMD, dialog["title"])
        q = w.question()
        self.assertEqual(q["kind"], "permission")
        self.assertEqual(q["agent"], "pi")
        self.assertEqual(q.get("body"), MARKER_CMD)
        w.respond(q, "allow-once")
        end = rpc.tool_end()
        self.assertFalse(end.get("isError"), end)
        rpc.settled()
        self.assertTrue(w.marker())

    def test_deny_from_the_broker_blocks_the_tool(self) -> None:
        w, rpc = self.world()
        rpc.ui_request("select")
        q = w.question()
        w.respond(q, "deny")
        end = rpc.tool_end()
        self.assertTrue(end.get("isError"), end)
        rpc.settled()
        self.assertFalse(w.marker())
        self.assertIn("Denied via agentnotify", " ".join(w.model.tool_results()))

    def test_pis_own_dialog_first_wins_and_withdraws_the_question(self) -> None:
        w, rpc = self.world()
        dialog = rpc.ui_request("select")
        q = w.question()
        rpc.send({"type": "extension_ui_response", "id": dialog["id"], "value": "Allow"})
        end = rpc.tool_end()
        self.assertFalse(end.get("isError"), end)
        self.assertTrue(w.marker())
        w.becomes(q["id"], "cancelled")

    def test_pis_own_deny_first_blocks_and_withdraws(self) -> None:
        w, rpc = self.world()
        dialog = rpc.ui_request("select")
        q = w.question()
        rpc.send({"type": "extension_ui_response", "id": dialog["id"], "cancelled": True})
        self.assertTrue(rpc.tool_end().get("isError"))
        rpc.settled()
        self.assertFalse(w.marker())
        self.assertIn("Blocked by user", " ".join(w.model.tool_results()))
        w.becomes(q["id"], "cancelled")

    def test_broker_down_mid_wait_leaves_the_call_to_pis_dialog(self) -> None:
        w, rpc = self.world()
        dialog = rpc.ui_request("select")
        w.question()
        pid = w.broker_pid()
        assert pid
        os.kill(pid, signal.SIGKILL)
        # Nothing is decided for the person: the tool waits for Pi's own dialog.
        rpc.send({"type": "extension_ui_response", "id": dialog["id"], "value": "Deny"})
        self.assertTrue(rpc.tool_end().get("isError"))
        rpc.settled()
        self.assertFalse(w.marker())
        self.assertIn("Blocked by user", " ".join(w.model.tool_results()))


class PiPrintModeTests(unittest.TestCase):
    """`pi -p`: no dialog, so the broker alone decides, and any failure blocks."""

    def run_print(self, answer: Callable[[World], None]) -> World:
        w = World(self, [bash()])
        w.install()
        err = open(w.root / "pi.err", "wb")
        proc = subprocess.Popen([PI, "-p", "--no-session", "--offline", "--provider", "fake",
                                 "--model", "fake-model", "Please do the task."], cwd=w.proj,
                                env=w.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=err, start_new_session=True)
        w.procs.append(proc)
        answer(w)
        self.assertEqual(proc.wait(timeout=LIMIT), 0, w.tail())
        return w

    def test_allow_from_the_broker_runs_the_tool(self) -> None:
        w = self.run_print(lambda w: w.respond(w.question(), "allow-once"))
        self.assertTrue(w.marker())

    def test_a_broker_killed_mid_wait_blocks_the_call(self) -> None:
        def kill(w: World) -> None:
            w.question()
            pid = w.broker_pid()
            assert pid
            os.kill(pid, signal.SIGKILL)
        w = self.run_print(kill)
        self.assertFalse(w.marker())
        self.assertIn("agentnotify could not ask", " ".join(w.model.tool_results()))


class PiRpcTests(unittest.TestCase):
    """`agentnotify pi -- pi --mode rpc …`: every dialog also answered through the broker."""

    def world(self, dialogs: str, *wrapper: str) -> tuple[World, Rpc]:
        w = World(self, [bash()])
        argv = [str(AGENTNOTIFY), "pi", *wrapper, "--", *w.pi_argv("-e", str(DIALOGS_EXT))]
        return w, w.start(argv, PI_DIALOGS=dialogs)

    def test_select_confirm_input_editor_answered_through_the_broker(self) -> None:
        w, rpc = self.world("select,confirm,input,editor")
        q = w.question()
        self.assertEqual((q["kind"], q["prompt"]), ("single_choice", "Pick a colour"))
        self.assertEqual([c["label"] for c in q["choices"]], ["red", "green", "blue sky"])
        w.respond(q, "o3")
        q = w.question()
        self.assertEqual((q["kind"], q.get("body")), ("permission", "It touches production."))
        w.respond(q, "allow-once")
        q = w.question()
        self.assertEqual((q["kind"], q["prompt"]), ("text", "Your name?"))
        w.respond_with(q, "--text", "Ada")
        q = w.question()
        self.assertEqual((q["kind"], q.get("body")), ("text", "first draft"))
        w.respond_with(q, "--text", "second draft")
        rpc.tool_end()
        rpc.settled()
        self.assertEqual(w.dialogs(), [
            {"method": "select", "value": "blue sky"},
            {"method": "confirm", "value": True},
            {"method": "input", "value": "Ada"},
            {"method": "editor", "value": "second draft"},
        ])
        # The client saw every dialog too, unchanged.
        methods = [r["method"] for r in rpc.records if r.get("type") == "extension_ui_request"]
        self.assertEqual(methods[:4], ["select", "confirm", "input", "editor"])
        self.assertTrue(w.marker())

    def test_our_extension_under_the_wrapper_asks_once(self) -> None:
        w = World(self, [bash()])
        w.install()
        rpc = w.start([str(AGENTNOTIFY), "pi", "--", *w.pi_argv()])
        q = w.question()
        self.assertEqual([c["label"] for c in q["choices"]], ["Allow", "Deny"])
        self.assertEqual(len(w.interactions("--pending")), 1, "one call, one question")
        w.respond(q, "o1")
        self.assertFalse(rpc.tool_end().get("isError"))
        self.assertTrue(w.marker())

    def test_confirm_denied_through_the_broker(self) -> None:
        w, rpc = self.world("confirm")
        w.respond(w.question(), "deny")
        rpc.settled()
        self.assertEqual(w.dialogs(), [{"method": "confirm", "value": False}])

    def test_the_clients_answer_first_wins_and_withdraws_the_question(self) -> None:
        w, rpc = self.world("select")
        dialog = rpc.ui_request("select")
        q = w.question()
        rpc.send({"type": "extension_ui_response", "id": dialog["id"], "value": "red"})
        rpc.settled()
        self.assertEqual(w.dialogs(), [{"method": "select", "value": "red"}])
        w.becomes(q["id"], "cancelled")

    def test_a_dialog_pi_times_out_itself_is_withdrawn_at_the_broker(self) -> None:
        w, rpc = self.world("timed-input")
        q = w.question()
        rpc.settled()
        self.assertEqual(w.dialogs(), [{"method": "timed-input", "value": None}])
        w.becomes(q["id"], "cancelled")

    def test_expiry_at_the_broker_dismisses_the_dialog(self) -> None:
        w, rpc = self.world("input", "--ttl", "30")
        q = w.question()
        self.assertLessEqual(
            time.mktime(time.strptime(q["expires_at"][:19], "%Y-%m-%dT%H:%M:%S"))
            - time.mktime(time.strptime(q["created_at"][:19], "%Y-%m-%dT%H:%M:%S")), 31)
        rpc.settled()  # would wait for ever without the wrapper's `cancelled: true`
        self.assertEqual(w.dialogs(), [{"method": "input", "value": None}])
        self.assertEqual(w.status_of(q["id"]), "expired")

    def test_broker_down_mid_wait_leaves_the_dialog_to_the_client(self) -> None:
        w, rpc = self.world("select")
        dialog = rpc.ui_request("select")
        w.question()
        pid = w.broker_pid()
        assert pid
        os.kill(pid, signal.SIGKILL)
        rpc.send({"type": "extension_ui_response", "id": dialog["id"], "value": "green"})
        rpc.settled()
        self.assertEqual(w.dialogs(), [{"method": "select", "value": "green"}])

    def test_pi_exiting_withdraws_open_questions_at_once(self) -> None:
        w, rpc = self.world("select")
        q = w.question()
        pi_pid = int(Path(f"/proc/{rpc.proc.pid}/task/{rpc.proc.pid}/children").read_text().split()[0])
        os.kill(pi_pid, signal.SIGKILL)
        # Well inside the owner lease (15 s): the wrapper withdrew it, not the broker's reaper.
        wait_for("the question withdrawn", lambda: w.status_of(q["id"]) == "cancelled", 8)
        self.assertEqual(rpc.proc.wait(timeout=LIMIT), 128 + signal.SIGKILL)

    def test_a_signal_to_the_wrapper_withdraws_its_questions_at_once(self) -> None:
        w, rpc = self.world("select")
        q = w.question()
        os.kill(rpc.proc.pid, signal.SIGTERM)
        # Withdrawn at once, whenever Pi gets round to ending (1.6.0 waits for its dialog).
        wait_for("the question withdrawn", lambda: w.status_of(q["id"]) == "cancelled", 8)


def main() -> int:
    if not PI:
        print("pi: PI_BIN is not set (run tests/hosts/pi.sh)")
        return 1
    started = time.monotonic()
    loader = unittest.TestLoader()
    module = sys.modules[__name__]
    names = sys.argv[1:]
    suite = loader.loadTestsFromNames(names, module) if names else loader.loadTestsFromModule(module)
    print(f"pi: pi={PI} bin={BIN_DIR}")
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors)
    passed = result.testsRun - failed - len(result.skipped)
    print(f"pi: took {time.monotonic() - started:.0f} s")
    print(f"pi: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
