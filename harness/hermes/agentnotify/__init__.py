"""agentnotify's approval transport for Hermes Agent.

Hermes hands every command approval to `present`; it asks the person through agentnotify
(`agentnotify-hook hermes ask-approval`, which finds or starts the local broker) and returns
`request.respond(choice)` with the choice the person made, one of Hermes' own
`allowed_choices`. Anything but an answer raises, so Hermes blocks the command (or, with
`security.approval.transport_fallback: builtin`, asks in its own prompt): this transport never
returns a choice nobody made.

Enable it in $HERMES_HOME/config.yaml:
    plugins: {enabled: [agentnotify]}
    security: {approval: {transport: agentnotify}}
"""

import dataclasses
import json
import signal
import subprocess

NAME = "agentnotify"
# Filled in by `agentnotify-hook install-harness hermes` with the hook's absolute path.
HOOK = "{{hook}}"
# After asking the hook to stop (it withdraws its question), how long it may take.
_STOP_GRACE_SECONDS = 1.0


class AgentnotifyUnavailable(RuntimeError):
    """No answer came through agentnotify; Hermes keeps its safe default."""


def _hook():
    return "agentnotify-hook" if HOOK.startswith("{{") else HOOK


def _as_json(request):
    data = {}
    for field in dataclasses.fields(request):
        value = getattr(request, field.name)
        data[field.name] = list(value) if isinstance(value, tuple) else value
    return json.dumps(data).encode("utf-8")


def present(request):
    allowed = tuple(request.allowed_choices)
    timeout = float(request.timeout_seconds)
    try:
        child = subprocess.Popen(
            [_hook(), "hermes", "ask-approval", "--timeout", str(max(1, int(timeout)))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError as e:
        raise AgentnotifyUnavailable("agentnotify-hook could not be started") from e
    try:
        out, _ = child.communicate(_as_json(request), timeout=timeout)
    except subprocess.TimeoutExpired as e:
        # The hook's own budget ends first; this is the backstop. SIGTERM lets it withdraw.
        child.send_signal(signal.SIGTERM)
        try:
            child.communicate(timeout=_STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
        raise AgentnotifyUnavailable("no answer through agentnotify in time") from e
    words = out.decode("utf-8", "replace").split()
    if len(words) != 1 or words[0] not in allowed:
        raise AgentnotifyUnavailable("no answer through agentnotify")
    return request.respond(words[0])


def register(ctx):
    ctx.register_approval_transport(NAME, present)
