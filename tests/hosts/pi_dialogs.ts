/**
 * Test extension for the RPC path: on each bash call it opens the dialogs named in
 * PI_DIALOGS (comma-separated: select, confirm, input, editor, timed-input), appends what
 * each returned to PI_DIALOG_LOG (one JSON line each), and lets the call run.
 */
import { appendFileSync } from "node:fs";

export default function (pi: any) {
  pi.on("tool_call", async (event: any, ctx: any) => {
    if (event.toolName !== "bash") return undefined;
    const log = (method: string, value: unknown) =>
      appendFileSync(process.env.PI_DIALOG_LOG!, JSON.stringify({ method, value: value ?? null }) + "\n");
    for (const d of (process.env.PI_DIALOGS ?? "").split(",").filter(Boolean)) {
      if (d === "select") log(d, await ctx.ui.select("Pick a colour", ["red", "green", "blue sky"]));
      if (d === "confirm") log(d, await ctx.ui.confirm("Proceed with the deploy?", "It touches production."));
      if (d === "input") log(d, await ctx.ui.input("Your name?", "e.g. Ada"));
      if (d === "editor") log(d, await ctx.ui.editor("Edit the message", "first draft"));
      if (d === "timed-input") log(d, await ctx.ui.input("Quick, a word?", "", { timeout: 1500 }));
    }
    return undefined;
  });
}
