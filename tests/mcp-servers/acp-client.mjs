// An ACP client built on the official SDK (@agentclientprotocol/sdk), for amber's end-to-end
// tests (tests/tests/acp.rs). It spawns the agent given after `--`, runs the steps given as
// JSON in ACP_STEPS, and prints one JSON line per thing that happened: the SDK parses
// (and so checks against the v1 schema) every message it receives.
//
//   ACP_STEPS='[{"op":"initialize"},{"op":"new"},{"op":"prompt","text":"hi"}]'
//   ACP_ANSWERS='allow_once,reject_once'   (permission answers, in order; default reject_once;
//   `wait`: answer nothing until the agent withdraws the request)
//   node acp-client.mjs -- amber-cli --socket S acp
//
// Steps: initialize · new {cwd} · load {session} · list {cwd?} · prompt {text, session?, cancelOnChunk?,
// blocks?} · set_mode {mode, session?} · wait_update {update, mode?} (until such a session/update
// arrived) · wait_text {text} (until the agent_message_chunks so far contain it) · sleep {ms}. A step's session defaults to the last one created.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const argv = process.argv.slice(process.argv.indexOf("--") + 1);
const steps = JSON.parse(process.env.ACP_STEPS ?? "[]");
const answers = (process.env.ACP_ANSWERS ?? "").split(",").filter((a) => a);
const lines = [];
const log = (entry) => {
  lines.push(entry);
  process.stdout.write(JSON.stringify(entry) + "\n");
};

const agent = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));

let onChunk = null;
const app = acp
  .client({ name: "amber-acp-test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    log({ kind: "update", sessionId: params.sessionId, update: params.update });
    if (params.update.sessionUpdate === "agent_message_chunk" && onChunk) {
      const f = onChunk;
      onChunk = null;
      f();
    }
  })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params, signal }) => {
    const answer = answers.shift() ?? "reject_once";
    log({ kind: "permission", params, answer });
    if (answer === "wait") {
      // Answered elsewhere: wait until the agent withdraws the request ($/cancel_request).
      // The withdrawal may arrive in the same read as the request, before this handler runs.
      if (!signal.aborted) {
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      }
      log({ kind: "permission_withdrawn", toolCallId: params.toolCall.toolCallId });
      return { outcome: { outcome: "cancelled" } };
    }
    if (answer === "cancelled") return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: answer } };
  });

const failed = (step, e) =>
  log({ kind: "error", op: step.op, code: e?.code ?? null, message: String(e?.message ?? e) });

await app.connectWith(stream, async (ctx) => {
  let session = null;
  for (const step of steps) {
    const sid = step.session ?? session;
    try {
      switch (step.op) {
        case "initialize": {
          const r = await ctx.request(acp.methods.agent.initialize, {
            protocolVersion: acp.PROTOCOL_VERSION,
            clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
          });
          log({ kind: "result", op: step.op, result: r });
          break;
        }
        case "new": {
          const r = await ctx.request(acp.methods.agent.session.new, { cwd: step.cwd, mcpServers: step.mcpServers ?? [] });
          session = r.sessionId;
          log({ kind: "result", op: step.op, result: r });
          break;
        }
        case "load": {
          const r = await ctx.request(acp.methods.agent.session.load, { sessionId: sid, cwd: step.cwd, mcpServers: [] });
          session = sid;
          log({ kind: "result", op: step.op, result: r });
          break;
        }
        case "prompt": {
          if (step.cancelOnChunk) {
            onChunk = () => ctx.notify(acp.methods.agent.session.cancel, { sessionId: sid });
          }
          const prompt = step.blocks ?? [{ type: "text", text: step.text }];
          const r = await ctx.request(acp.methods.agent.session.prompt, { sessionId: sid, prompt });
          log({ kind: "result", op: step.op, result: r });
          break;
        }
        case "list": {
          const r = await ctx.request(acp.methods.agent.session.list, step.cwd ? { cwd: step.cwd } : {});
          log({ kind: "result", op: step.op, result: r });
          break;
        }
        case "set_mode": {
          const r = await ctx.request(acp.methods.agent.session.setMode, { sessionId: sid, modeId: step.mode });
          log({ kind: "result", op: step.op, result: r });
          break;
        }
        case "sleep": {
          await new Promise((r) => setTimeout(r, step.ms));
          break;
        }
        case "wait_update": {
          // Until a session/update of this kind (and mode, if given) arrives, at most 20 s.
          const seen = () =>
            lines.some(
              (l) =>
                l.kind === "update" &&
                l.update.sessionUpdate === step.update &&
                (step.mode === undefined || l.update.currentModeId === step.mode),
            );
          const deadline = Date.now() + 20000;
          while (!seen() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
          log({ kind: "result", op: step.op, result: { seen: seen() } });
          break;
        }
        case "wait_text": {
          // Until the agent's message chunks, joined, contain `text`, at most 60 s.
          const said = () =>
            lines
              .filter((l) => l.kind === "update" && l.update.sessionUpdate === "agent_message_chunk")
              .map((l) => l.update.content?.text ?? "")
              .join("");
          const deadline = Date.now() + 60000;
          while (!said().includes(step.text) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
          log({ kind: "result", op: step.op, result: { seen: said().includes(step.text) } });
          break;
        }
        default:
          throw new Error(`unknown step ${step.op}`);
      }
    } catch (e) {
      failed(step, e);
    }
  }
});
agent.stdin.end();
await new Promise((resolve) => agent.on("exit", resolve));
log({ kind: "done" });
process.exit(0);
