"""What the host suites (test_hosts.py, test_pi.py, test_openclaw.py) share: where our
binaries are, polling with a deadline, and our CLI against the broker of one test's
AGENTNOTIFY_HOME. Stdlib only; imported from the suites' own folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BIN_DIR = Path(os.environ.get("AGENTNOTIFY_BIN_DIR") or REPO / "target" / "debug").resolve()
AGENTNOTIFY = BIN_DIR / "agentnotify"
HOOK = BIN_DIR / "agentnotify-hook"
KEEP = os.environ.get("HOSTS_KEEP") == "1"
MARKER_CMD = "echo ran > marker.txt"


def wait_for(what: str, probe: Callable[[], Any], limit: float, interval: float = 0.1) -> Any:
    """Polls `probe` until it returns something truthy; fails after `limit` seconds."""
    deadline = time.monotonic() + limit
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit:.0f} s waiting for {what}")
        time.sleep(interval)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return True


def broker_env(home: Path, tmp: Path, an_home: Path) -> dict[str, str]:
    """A clean environment for our binaries (nothing of the real user's home), with our
    binaries first on PATH and the broker on an ephemeral port."""
    return {
        "PATH": f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "AGENTNOTIFY_HOME": str(an_home),
        "AGENTNOTIFY_PORT": "0",
    }


class BrokerCli:
    """Our CLI against one test's broker. The world it is mixed into sets `an_home`, says
    how it runs a binary (`run`), and, to answer with `respond`, keeps the ids it answered
    in `answered`."""

    an_home: Path
    answered: set[str]

    def run(self, exe: Path, *args: str) -> subprocess.CompletedProcess[str]:
        raise NotImplementedError

    def broker_pid(self) -> int | None:
        """The pid the broker recorded in AGENTNOTIFY_HOME, if it did."""
        try:
            pid = json.loads((self.an_home / "broker.json").read_text()).get("pid")
        except (OSError, ValueError):
            return None
        return pid if isinstance(pid, int) else None

    def kill_broker(self) -> None:
        pid = self.broker_pid()
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def interactions(self, *filters: str) -> list[dict[str, Any]]:
        r = self.run(AGENTNOTIFY, "interactions", "list", "--json", *filters)
        return json.loads(r.stdout)["interactions"]

    def unanswered(self) -> dict[str, Any] | None:
        """The first pending question this test has not answered yet, if any."""
        fresh = [i for i in self.interactions("--pending") if i["id"] not in self.answered]
        return fresh[0] if fresh else None

    def respond(self, item: dict[str, Any], choice: str) -> dict[str, Any]:
        return self.respond_with(item, "--choice", choice)

    def respond_with(self, item: dict[str, Any], *answer: str) -> dict[str, Any]:
        """Answers with any of --choice / --choice-ids / --text."""
        self.answered.add(item["id"])
        r = self.run(AGENTNOTIFY, "interactions", "respond", item["id"],
                     "--digest", item["request_digest"], "--nonce", item["nonce"], *answer)
        return json.loads(r.stdout)

    def status_of(self, item_id: str) -> str:
        r = self.run(AGENTNOTIFY, "interactions", "get", item_id)
        return json.loads(r.stdout)["status"]
