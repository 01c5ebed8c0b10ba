"""Benchmark: what `agentnotify pi` adds between Pi and the broker (docs/BENCHMARKS.md).

    cargo build --release --bins   # or use target/debug (slower, not the figure quoted)
    AGENTNOTIFY_BIN_DIR=target/release python3 tests/hosts/bench_pi.py [N]

Runs the real wrapper and the real broker on a temp AGENTNOTIFY_HOME with a stand-in Pi:
this same script in `--fake-pi` mode, as the wrapper's child. For each of N dialogs the
stand-in writes one `select` request (t0), finds the question at the broker with a tight
loop of list calls (t1: visible), answers it, and reads the wrapper's
`extension_ui_response` on its stdin (t3). Reported: request → visible (t1 - t0) and
answer sent → Pi has it (t3 - t1), next to the broker's own cost for the same calls made
directly (create, answer), so the difference is what the wrapper adds. Then the same for
the extension's path: N runs of `agentnotify-hook pi gate` as the extension spawns it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN_DIR = Path(os.environ.get("AGENTNOTIFY_BIN_DIR") or HERE.parent.parent / "target" / "debug")


class Broker:
    def __init__(self, home: Path):
        info = json.loads((home / "broker.json").read_text())
        self.url = info["url"]
        self.token = (home / "token").read_text().strip()

    def call(self, method: str, path: str, body: object = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "authorization": f"Bearer {self.token}", "content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def answer(self, q: dict, n: int) -> None:
        self.call("POST", f"/v1/interactions/{q['id']}/respond", {
            "response_id": f"bench-{n}", "request_digest": q["request_digest"],
            "nonce": q["nonce"], "choice_id": "o1", "source": "cli"})


def ms(values: list[float]) -> str:
    values = sorted(values)
    p = lambda q: values[min(len(values) - 1, int(q * len(values)))] * 1000
    return f"p50 {p(0.5):6.2f} ms   p95 {p(0.95):6.2f} ms"


def fake_pi(n: int, out_path: str) -> None:
    broker = Broker(Path(os.environ["AGENTNOTIFY_HOME"]))
    visible, delivered, direct_create, direct_answer = [], [], [], []
    for i in range(n):
        t0 = time.perf_counter()
        sys.stdout.write(json.dumps({"type": "extension_ui_request", "id": f"bench-{i}",
                                     "method": "select", "title": f"Pick {i}",
                                     "options": ["yes", "no"]}) + "\n")
        sys.stdout.flush()
        while True:
            found = broker.call("GET", "/v1/interactions?pending=true&limit=1")["interactions"]
            if found and found[0]["native_request_id"] == f"bench-{i}":
                break
        t1 = time.perf_counter()
        broker.answer(found[0], i)
        line = sys.stdin.readline()
        t3 = time.perf_counter()
        assert json.loads(line)["value"] == "yes", line
        visible.append(t1 - t0)
        delivered.append(t3 - t1)
        # The broker's own cost for the same two calls, made directly.
        s = time.perf_counter()
        q = broker.call("POST", "/v1/interactions/request", {
            "kind": "single_choice", "prompt": f"Direct {i}", "agent": "pi",
            "choices": [{"id": "o1", "label": "yes"}, {"id": "o2", "label": "no"}]})
        direct_create.append(time.perf_counter() - s)
        s = time.perf_counter()
        broker.answer(q, 100000 + i)
        direct_answer.append(time.perf_counter() - s)
    Path(out_path).write_text(json.dumps({"visible": visible, "delivered": delivered,
                                          "direct_create": direct_create,
                                          "direct_answer": direct_answer}))


def gate(broker: Broker, env: dict, n: int) -> dict[str, list[float]]:
    """The extension's path: spawn `agentnotify-hook pi gate` as the extension does."""
    hook = str(BIN_DIR / "agentnotify-hook")
    visible, delivered = [], []
    for i in range(n):
        call = json.dumps({"tool_name": "bash", "tool_call_id": f"call-{i}", "cwd": "/w/shop",
                           "input": {"command": f"echo {i}"}, "session_id": "bench"})
        t0 = time.perf_counter()
        child = subprocess.Popen([hook, "pi", "gate"], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdin and child.stdout
        child.stdin.write(call)
        child.stdin.close()
        while True:
            found = broker.call("GET", "/v1/interactions?pending=true&limit=1")["interactions"]
            if found and found[0].get("native_request_id") == f"call-{i}":
                break
        t1 = time.perf_counter()
        q = found[0]
        broker.call("POST", f"/v1/interactions/{q['id']}/respond", {
            "response_id": f"gate-{i}", "request_digest": q["request_digest"],
            "nonce": q["nonce"], "choice_id": "allow-once", "source": "cli"})
        line = child.stdout.readline()
        t2 = time.perf_counter()
        assert json.loads(line) == {"decision": "allow"}, line
        child.wait()
        visible.append(t1 - t0)
        delivered.append(t2 - t1)
    return {"visible": visible, "delivered": delivered}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--fake-pi":
        fake_pi(int(sys.argv[2]), sys.argv[3])
        return 0
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory(prefix="agentnotify-bench-pi-") as tmp:
        home = Path(tmp)
        env = {**os.environ, "AGENTNOTIFY_HOME": str(home), "AGENTNOTIFY_PORT": "0",
               "HOME": str(home)}
        agentnotify = str(BIN_DIR / "agentnotify")
        # The broker without its POST rate limit (a benchmark posts faster than a person).
        daemon = subprocess.Popen([agentnotify, "daemon", "--port", "0", "--rate-limit",
                                   "100000", "--rate-burst", "100000"], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert daemon.stdout and "listening" in daemon.stdout.readline()
        out = home / "result.json"
        # The person's side stays open (its end would close Pi's stdin too).
        wrapper = subprocess.Popen([agentnotify, "pi", "--", sys.executable, __file__,
                                    "--fake-pi", str(n), str(out)], env=env,
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        assert wrapper.wait() == 0, "the stand-in Pi failed"
        assert wrapper.stdin
        wrapper.stdin.close()
        r = json.loads(out.read_text())
        g = gate(Broker(home), env, n)
        daemon.terminate()
        daemon.wait()
    print(f"agentnotify pi, {n} dialogs ({BIN_DIR.name} build)")
    print(f"  Pi's request -> question visible  {ms(r['visible'])}")
    print(f"    the broker's create, direct     {ms(r['direct_create'])}")
    print(f"  answer sent -> Pi has the reply   {ms(r['delivered'])}")
    print(f"    the broker's answer, direct     {ms(r['direct_answer'])}")
    for leg, direct, name in (("visible", "direct_create", "request"),
                              ("delivered", "direct_answer", "answer")):
        added = statistics.median(r[leg]) - statistics.median(r[direct])
        print(f"  added by the wrapper, {name} leg (p50 difference): {added * 1000:.2f} ms")
    print(f"extension path: agentnotify-hook pi gate, {n} calls (a new process each)")
    print(f"  gate spawned -> question visible  {ms(g['visible'])}")
    print(f"  answer sent -> decision printed   {ms(g['delivered'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
