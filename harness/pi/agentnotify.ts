/**
 * agentnotify for Pi: before each gated tool call, ask the person through the agentnotify
 * broker (web page, terminal, phone) while Pi's own dialog stays open. The first answer
 * wins; the other side is withdrawn. Any failure on the broker's side leaves the call to
 * Pi's dialog (or blocks it when Pi has no UI): nothing runs that nobody allowed.
 *
 * Installed by `agentnotify-hook install-harness pi`, which fills in the executable's path.
 * Under `agentnotify pi -- pi --mode rpc …` the wrapper already asks every dialog at the
 * broker, so only the dialog is opened.
 */
import { spawn } from "node:child_process";

/** The `agentnotify-hook` executable (filled in at install). */
const HOOK = "{{hook}}";
/** Seconds the broker's question lives; Pi's dialog has no timeout of its own. */
const TIMEOUT_SECS = 590;
/** The tools that change something; reading tools run unasked. */
const GATED = new Set(["bash", "edit", "write"]);

type Decision = "allow" | "deny";
type Winner = { side: "local" | "remote"; decision: Decision; reason?: string };
/** Why a call is blocked when the broker could not ask and Pi has no dialog (`pi -p`). */
const UNASKED = "Blocked: agentnotify could not ask, and Pi has no dialog here";

export default function (pi: any) {
  pi.on("tool_call", async (event: any, ctx: any) => {
    if (!GATED.has(event.toolName)) return undefined;
    const viaWrapper = process.env.AGENTNOTIFY_PI_RPC === "1";
    const remote = viaWrapper ? null : askRemotely(event, ctx);
    const local = new AbortController();
    const dialog: Promise<Winner> | null = ctx.hasUI
      ? ctx.ui
          .select(`Allow this ${event.toolName} call?\n\n${describe(event)}`, ["Allow", "Deny"], {
            signal: local.signal,
          })
          .then((c: string | undefined): Winner => ({ side: "local", decision: c === "Allow" ? "allow" : "deny" }))
      : null;
    const aborted = new Promise<Winner>((resolve) =>
      ctx.signal?.addEventListener("abort", () => resolve({ side: "local", decision: "deny" }), { once: true }),
    );
    // A remote failure (null) never decides: it leaves the call to the dialog.
    const remoteDecided = remote?.decision.then((d): Winner | Promise<Winner> =>
      d ? { side: "remote", decision: d } : dialog ? new Promise(() => {}) : { side: "remote", decision: "deny", reason: UNASKED },
    );
    const sides = [dialog, remoteDecided, aborted].filter((p): p is Promise<Winner> => p != null);
    if (!dialog && !remoteDecided) return { block: true, reason: UNASKED };
    const winner = await Promise.race(sides);
    if (winner.side === "remote") local.abort();
    else remote?.cancel();
    if (winner.decision === "allow") return undefined;
    const reason = winner.reason ?? (winner.side === "remote" ? "Denied via agentnotify" : "Blocked by user");
    return { block: true, reason };
  });
}

/** What the dialog shows: the command, or the file and the change. */
function describe(event: any): string {
  const input = event.input ?? {};
  if (event.toolName === "bash") return String(input.command ?? "");
  if (event.toolName === "write") return `${input.path}\n\n${input.content ?? ""}`;
  return JSON.stringify(input, null, 2);
}

/** Spawns `agentnotify-hook pi gate`; its decision, or null on anything else. */
function askRemotely(event: any, ctx: any): { decision: Promise<Decision | null>; cancel: () => void } {
  let child: ReturnType<typeof spawn> | undefined;
  let settled = false;
  const decision = new Promise<Decision | null>((resolve) => {
    try {
      child = spawn(HOOK, ["pi", "gate", "--timeout", String(TIMEOUT_SECS)], {
        stdio: ["pipe", "pipe", "ignore"],
      });
    } catch {
      resolve(null);
      return;
    }
    let out = "";
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (d: string) => (out += d));
    child.on("error", () => resolve(null));
    child.on("close", () => {
      settled = true;
      try {
        const d = JSON.parse(out.trim()).decision;
        resolve(d === "allow" || d === "deny" ? d : null);
      } catch {
        resolve(null);
      }
    });
    child.stdin?.on("error", () => {});
    let session: string | undefined;
    try {
      session = ctx.sessionManager?.getSessionId?.();
    } catch {}
    child.stdin?.end(
      JSON.stringify({
        tool_name: event.toolName,
        tool_call_id: event.toolCallId,
        input: event.input,
        cwd: ctx.cwd,
        session_id: session,
      }),
    );
  });
  // SIGTERM makes the gate withdraw its question.
  const cancel = () => {
    if (!settled) child?.kill("SIGTERM");
  };
  return { decision, cancel };
}
