"""Adapter overhead of the Hermes transport and of ARC 0.2 (docs/BENCHMARKS.md).

Replays a recorded request: Hermes' own `ApprovalRequest` (from the installed package) is
handed to our plugin's `present`, exactly as Hermes' transport worker does, against a warm
broker (`agentnotify daemon`). Measured:

* request → question visible: `present` called → the record's `created_at` in the broker
  (the hook's spawn, attach, the durable create);
* answer → host receives: the answer POSTed → `present` returned `request.respond(choice)`;
* ARC: `POST /v1/events` (created) against `POST /v1/notifications` with the same content.

    target/hosts/hermes-<v>/bin/python tests/hosts/bench_hermes.py [SAMPLES] [BIN_DIR]
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from hermes_cli.approval_transport import ApprovalRequest

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = int(sys.argv[1]) if len(sys.argv) > 1 else 100
BIN_DIR = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "../../target/debug"))


def load_plugin():
    path = os.path.join(HERE, "../../harness/hermes/agentnotify/__init__.py")
    spec = importlib.util.spec_from_file_location("agentnotify_plugin", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.HOOK = os.path.join(BIN_DIR, "agentnotify-hook")
    return module


class Broker:
    def __init__(self, home: str):
        env = dict(os.environ, AGENTNOTIFY_HOME=home)
        self.proc = subprocess.Popen([os.path.join(BIN_DIR, "agentnotify"), "daemon", "--port", "0",
                                      "--rate-limit", "100000", "--rate-burst", "100000"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        line = self.proc.stdout.readline().decode()
        self.url = next(w for w in line.split() if w.startswith("http://"))
        with open(os.path.join(home, "token")) as f:
            self.token = f.read().strip()

    def call(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"authorization": f"Bearer {self.token}",
                                              "content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                return res.status, json.loads(res.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def row(name, xs):
    print(f"| {name} | {len(xs)} | {statistics.median(xs):.2f} ms | {pct(xs, 99):.2f} ms | {max(xs):.2f} ms |")


def main():
    plugin = load_plugin()
    home = tempfile.mkdtemp(prefix="an-bench-hermes-")
    os.environ["AGENTNOTIFY_HOME"] = home
    broker = Broker(home)
    visible, answered, events, notifications = [], [], [], []
    try:
        for i in range(SAMPLES + 5):
            req = ApprovalRequest.create(command=f"rm -rf build-{i}", description="delete in root path",
                                         pattern_key="delete in root path", pattern_keys=("delete in root path",),
                                         session_key="s", surface="cli", allow_session=True,
                                         allow_permanent=True, timeout_seconds=60)
            done = {}

            def host():
                done["decision"] = plugin.present(req)
                done["at"] = time.time()

            t0 = time.time()
            worker = threading.Thread(target=host)
            worker.start()
            while True:
                _, listed = broker.call("GET", "/v1/interactions?pending=true")
                if listed["interactions"]:
                    q = listed["interactions"][0]
                    break
            created = time.mktime(time.strptime(q["created_at"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
            created += int(q["created_at"][20:23]) / 1000
            t1 = time.time()
            status, _ = broker.call("POST", f"/v1/interactions/{q['id']}/respond", {
                "response_id": f"r{i}", "request_digest": q["request_digest"], "nonce": q["nonce"],
                "choice_id": "once", "source": "bench"})
            worker.join()
            assert status == 200 and done["decision"].choice == "once", done
            if i >= 5:  # the first few warm the page cache and the connection paths
                visible.append((created - t0) * 1000)
                answered.append((done["at"] - t1) * 1000)
        for i in range(SAMPLES + 5):
            body = {"title": "Codex needs input", "message": f"m{i}", "type": "input_required",
                    "priority": "high", "agent": "codex", "key": f"n{i}"}
            t = time.perf_counter()
            assert broker.call("POST", "/v1/notifications", body)[0] == 201
            n_ms = (time.perf_counter() - t) * 1000
            ev = {"arc_version": "0.2", "event_id": f"e{i}", "event_type": "request.created",
                  "occurred_at": "2026-12-01T10:00:00Z", "sender": {"id": "codex", "name": "Codex"},
                  "request": {"kind": "question", "message": f"m{i}", "key": f"a{i}"}}
            t = time.perf_counter()
            assert broker.call("POST", "/v1/events", ev)[0] == 201
            e_ms = (time.perf_counter() - t) * 1000
            if i >= 5:
                notifications.append(n_ms)
                events.append(e_ms)
    finally:
        broker.stop()
    print("| measurement | samples | p50 | p99 | max |")
    print("| --- | --- | --- | --- | --- |")
    row("Hermes: present() called → question visible (created_at)", visible)
    row("Hermes: answer POSTed → present() returned respond(choice)", answered)
    row("POST /v1/notifications (baseline)", notifications)
    row("POST /v1/events request.created (same content)", events)


if __name__ == "__main__":
    main()
