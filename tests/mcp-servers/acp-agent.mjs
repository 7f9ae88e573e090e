// An ACP (v1) agent built on the official SDK (@agentclientprotocol/sdk), for amber's
// end-to-end tests: amberd spawns it as an external agent (`node acp-agent.mjs`, NDJSON on
// stdio) and drives it as an ACP client. What it does is scripted by the prompt text: the
// text blocks of a prompt are joined (one per line) and every line starting with `!` is a
// directive, run in order; other lines are ignored.
//
//   !say TEXT              agent_message_chunk "TEXT\n"
//   !read PATH             fs/read_text_file (PATH relative to the session cwd), then says
//                          "read PATH: <content>" / "read failed: <message>" /
//                          "read unsupported" (client did not advertise fs.readTextFile)
//   !write PATH CONTENT    tool_call w<N> (edit, pending), session/request_permission, then on
//                          allow fs/write_text_file (literal `\n` in CONTENT is a newline),
//                          tool_call_update completed/failed, says "wrote PATH" /
//                          "write failed: <message>"; on reject: tool_call_update failed and
//                          "write rejected"; on a cancelled outcome the turn ends (cancelled).
//                          "write unsupported" if the client did not advertise fs.writeTextFile.
//   !run COMMAND           tool_call r<N> (execute), permission, "ran COMMAND" / "run rejected"
//                          (nothing is run)
//   !usage IN OUT USD      usage_update {used: IN+OUT, size: 200000, cost: {amount: USD,
//                          currency: "USD"}}; the PromptResponse then carries
//                          usage {inputTokens: IN, outputTokens: OUT, totalTokens: IN+OUT}
//   !sleep MS              waits; a session/cancel meanwhile ends the turn (cancelled) at once
//   !crash                 process.exit(3)
//   !refuse                ends the turn with stopReason refusal
//
// A session/cancel for the session also ends the turn (cancelled) before the next directive.
// Only protocol messages go to stdout; everything else is logged to stderr.
import { randomUUID } from "node:crypto";
import { isAbsolute, resolve } from "node:path";
import { Readable, Writable } from "node:stream";

// The unstable entrypoint: PromptResponse.usage is an unstable v1 field. The wire protocol is
// ACP v1 either way.
const acp = await import("@agentclientprotocol/sdk/unstable");

const log = (...args) => console.error("[acp-test-agent]", ...args);
// Nothing but protocol messages may reach stdout.
console.log = console.error;
console.info = console.error;
console.debug = console.error;
process.on("uncaughtException", (e) => {
  log("uncaught exception:", e?.stack ?? e);
  process.exit(1);
});
process.on("unhandledRejection", (e) => log("unhandled rejection:", e?.stack ?? e));

const PERMISSION_OPTIONS = [
  { optionId: "allow", name: "Allow", kind: "allow_once" },
  { optionId: "always", name: "Always allow", kind: "allow_always" },
  { optionId: "reject", name: "Reject", kind: "reject_once" },
];

let clientCapabilities = {};
const sessions = new Map(); // sessionId -> {cwd, writes, runs, turn: AbortController | null}

const errorMessage = (e) => String(e?.message ?? e);

// Logs a handler's error to stderr before the SDK turns it into a JSON-RPC error.
const logged =
  (name, handler) =>
  async (ctx) => {
    try {
      return await handler(ctx);
    } catch (e) {
      log(`${name} failed:`, e?.stack ?? e);
      throw e;
    }
  };

class Cancelled extends Error {}

// Waits `ms`, or until `signal` aborts (then throws Cancelled).
const sleep = (ms, signal) =>
  new Promise((resolveSleep, reject) => {
    if (signal.aborted) return reject(new Cancelled());
    const onAbort = () => {
      clearTimeout(timer);
      reject(new Cancelled());
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolveSleep();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });

async function runTurn(client, sessionId, session, text, signal) {
  const update = (u) => client.notify(acp.methods.client.session.update, { sessionId, update: u });
  const say = (t) => update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: t + "\n" } });
  const checkCancelled = () => {
    if (signal.aborted) throw new Cancelled();
  };
  let usage = null;
  const done = (stopReason) => (usage ? { stopReason, usage } : { stopReason });

  // Sends a tool call, asks for permission; returns "allow" | "reject" (throws Cancelled).
  const permission = async (toolCall) => {
    await update({ sessionUpdate: "tool_call", ...toolCall });
    const { outcome } = await client.request(acp.methods.client.session.requestPermission, {
      sessionId,
      toolCall,
      options: PERMISSION_OPTIONS,
    });
    if (outcome.outcome === "cancelled" || signal.aborted) throw new Cancelled();
    return outcome.optionId === "allow" || outcome.optionId === "always" ? "allow" : "reject";
  };

  const lines = text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l.startsWith("!"));
  try {
    for (const line of lines) {
      checkCancelled();
      const space = line.indexOf(" ");
      const directive = space < 0 ? line.slice(1) : line.slice(1, space);
      const rest = space < 0 ? "" : line.slice(space + 1);
      switch (directive) {
        case "say":
          await say(rest);
          break;
        case "read": {
          const path = rest.trim();
          if (!clientCapabilities.fs?.readTextFile) {
            await say("read unsupported");
            break;
          }
          try {
            const r = await client.request(acp.methods.client.fs.readTextFile, {
              sessionId,
              path: resolve(session.cwd, path),
            });
            await say(`read ${path}: ${r.content}`);
          } catch (e) {
            await say(`read failed: ${errorMessage(e)}`);
          }
          break;
        }
        case "write": {
          const sp = rest.indexOf(" ");
          const path = sp < 0 ? rest : rest.slice(0, sp);
          const content = (sp < 0 ? "" : rest.slice(sp + 1)).replaceAll("\\n", "\n");
          if (!clientCapabilities.fs?.writeTextFile) {
            await say("write unsupported");
            break;
          }
          const abs = resolve(session.cwd, path);
          const toolCallId = `w${++session.writes}`;
          const answer = await permission({
            toolCallId,
            title: `Write ${path}`,
            kind: "edit",
            status: "pending",
            locations: [{ path: abs }],
            rawInput: { path: abs, content },
          });
          if (answer === "reject") {
            await update({ sessionUpdate: "tool_call_update", toolCallId, status: "failed" });
            await say("write rejected");
            break;
          }
          try {
            await client.request(acp.methods.client.fs.writeTextFile, { sessionId, path: abs, content });
          } catch (e) {
            const message = errorMessage(e);
            await update({
              sessionUpdate: "tool_call_update",
              toolCallId,
              status: "failed",
              content: [{ type: "content", content: { type: "text", text: message } }],
            });
            await say(`write failed: ${message}`);
            break;
          }
          await update({ sessionUpdate: "tool_call_update", toolCallId, status: "completed" });
          await say(`wrote ${path}`);
          break;
        }
        case "run": {
          const command = rest;
          const toolCallId = `r${++session.runs}`;
          const answer = await permission({
            toolCallId,
            title: `Run ${command}`,
            kind: "execute",
            status: "pending",
            rawInput: { command },
          });
          if (answer === "reject") {
            await update({ sessionUpdate: "tool_call_update", toolCallId, status: "failed" });
            await say("run rejected");
            break;
          }
          await update({ sessionUpdate: "tool_call_update", toolCallId, status: "completed" });
          await say(`ran ${command}`);
          break;
        }
        case "usage": {
          const [input, output, usd] = rest.trim().split(/\s+/);
          const inputTokens = Number.parseInt(input, 10) || 0;
          const outputTokens = Number.parseInt(output, 10) || 0;
          const amount = Number.parseFloat(usd) || 0;
          await update({
            sessionUpdate: "usage_update",
            used: inputTokens + outputTokens,
            size: 200000,
            cost: { amount, currency: "USD" },
          });
          usage = { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens };
          break;
        }
        case "sleep":
          await sleep(Number.parseInt(rest, 10) || 0, signal);
          break;
        case "crash":
          log("crashing on request (!crash)");
          process.exit(3);
          break;
        case "refuse":
          return done("refusal");
        default:
          log(`ignoring unknown directive ${line}`);
      }
    }
    checkCancelled();
  } catch (e) {
    if (e instanceof Cancelled || signal.aborted) return done("cancelled");
    throw e;
  }
  return done("end_turn");
}

const app = acp
  .agent({ name: "acp-test-agent" })
  .onRequest(
    acp.methods.agent.initialize,
    logged("initialize", ({ params }) => {
      clientCapabilities = params.clientCapabilities ?? {};
      log("initialize", JSON.stringify(params));
      return {
        protocolVersion: Math.min(params.protocolVersion, acp.PROTOCOL_VERSION),
        agentCapabilities: { loadSession: false },
        agentInfo: { name: "acp-test-agent", version: "1.0.0" },
        authMethods: [],
      };
    }),
  )
  .onRequest(
    acp.methods.agent.session.new,
    logged("session/new", ({ params }) => {
      if (typeof params.cwd !== "string" || !isAbsolute(params.cwd)) {
        throw acp.RequestError.invalidParams({ cwd: params.cwd }, "cwd must be an absolute path");
      }
      const sessionId = `sess-${randomUUID()}`;
      sessions.set(sessionId, { cwd: params.cwd, writes: 0, runs: 0, turn: null });
      log("session/new", sessionId, params.cwd);
      return { sessionId };
    }),
  )
  .onRequest(
    acp.methods.agent.session.prompt,
    logged("session/prompt", async ({ params, signal, client }) => {
      const session = sessions.get(params.sessionId);
      if (!session) throw acp.RequestError.invalidParams({ sessionId: params.sessionId }, "unknown session");
      if (session.turn) throw acp.RequestError.invalidRequest(undefined, "a prompt is already running");
      const text = params.prompt
        .filter((b) => b.type === "text")
        .map((b) => b.text)
        .join("\n");
      const turn = new AbortController();
      // The request withdrawn ($/cancel_request) counts as a cancel too.
      const onAbort = () => turn.abort();
      signal.addEventListener("abort", onAbort, { once: true });
      session.turn = turn;
      try {
        const response = await runTurn(client, params.sessionId, session, text, turn.signal);
        log("session/prompt done", JSON.stringify(response));
        return response;
      } finally {
        signal.removeEventListener("abort", onAbort);
        session.turn = null;
      }
    }),
  )
  .onNotification(
    acp.methods.agent.session.cancel,
    logged("session/cancel", ({ params }) => {
      log("session/cancel", params.sessionId);
      sessions.get(params.sessionId)?.turn?.abort();
    }),
  );

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
log("connection closed");
process.exit(0);
