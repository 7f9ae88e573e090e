// An ACP client built on the official SDK (@agentclientprotocol/sdk), for amber's end-to-end
// tests (tests/tests/acp.rs). It spawns the agent given after `--`, runs the steps given as
// JSON in ACP_STEPS, and prints one JSON line per thing that happened: the SDK parses
// (and so checks against the v1 schema) every message it receives. The SDK parses
// leniently (unknown fields dropped, bad values defaulted) and not at all for results, so
// every line the agent writes is also checked against the SDK's own schema (the full v1
// one, unstable additions included) for fields it would drop or values it would replace:
// each finding is logged as {kind: "schema", ...}.
//
//   ACP_STEPS='[{"op":"initialize"},{"op":"new"},{"op":"prompt","text":"hi"}]'
//   ACP_ANSWERS='allow_once,reject_once'   (permission answers, in order; default reject_once;
//   `wait`: answer nothing until the agent withdraws the request)
//   ACP_UNSTABLE=1                          (the SDK's unstable entrypoint: `fork` needs it)
//   ACP_FORM='{"name":"Ada"}'               (accept every `elicitation/create` with this
//   content; default: decline)
//   node acp-client.mjs -- amber-cli --socket S acp
//
// Steps: initialize {protocolVersion?, clientCapabilities?} · authenticate {methodId} ·
// new {cwd} · load {session} · resume {session, cwd} · fork {session, cwd} (unstable) ·
// list {cwd?} · prompt {text, session?, cancelOnChunk?, blocks?} · set_mode {mode, session?} ·
// wait_update {update, mode?} (until such a session/update arrived) · wait_text {text} (until
// the agent_message_chunks so far contain it) · sleep {ms}. A step's session defaults to the
// last one created, loaded, resumed or forked. The last line is {kind: "done", agentExit}.
import { spawn } from "node:child_process";
import { PassThrough, Readable, Writable } from "node:stream";
import { createInterface } from "node:readline";

const unstable = Boolean(process.env.ACP_UNSTABLE);
const acp = await import(unstable ? "@agentclientprotocol/sdk/unstable" : "@agentclientprotocol/sdk");
// The schema the SDK parses with, reached by path: the package does not export it.
const schema = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js", import.meta.url)
);

const argv = process.argv.slice(process.argv.indexOf("--") + 1);
const steps = JSON.parse(process.env.ACP_STEPS ?? "[]");
const answers = (process.env.ACP_ANSWERS ?? "").split(",").filter((a) => a);
const lines = [];
const log = (entry) => {
  lines.push(entry);
  process.stdout.write(JSON.stringify(entry) + "\n");
};

// Where `raw` has what `parsed` lost or changed: a field the schema does not know (dropped),
// a value it replaced by its default, an item it skipped.
const strays = (raw, parsed, path = "") => {
  if (typeof parsed === "bigint") parsed = Number(parsed);
  if (Array.isArray(raw)) {
    if (!Array.isArray(parsed) || parsed.length !== raw.length) return [`${path}: array changed`];
    return raw.flatMap((item, i) => strays(item, parsed[i], `${path}/${i}`));
  }
  if (raw !== null && typeof raw === "object") {
    if (parsed === null || typeof parsed !== "object") return [`${path}: object replaced`];
    return Object.keys(raw)
      .filter((k) => raw[k] !== undefined)
      .flatMap((k) => (k in parsed ? strays(raw[k], parsed[k], `${path}/${k}`) : [`${path}/${k}: unknown field`]));
  }
  return raw === parsed ? [] : [`${path}: ${JSON.stringify(raw)} read as ${JSON.stringify(parsed)}`];
};

const check = (what, zod, raw) => {
  const parsed = zod.safeParse(raw);
  const problems = parsed.success ? strays(raw, parsed.data) : [parsed.error.message];
  if (problems.length > 0) log({ kind: "schema", what, problems, raw });
};

const agent = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => agent.on("exit", (code, signal) => resolve(code ?? signal)));
// One copy of stdout for the SDK, one read raw for the schema check.
const toSdk = new PassThrough();
const raw = new PassThrough();
agent.stdout.pipe(toSdk);
agent.stdout.pipe(raw);
createInterface({ input: raw }).on("line", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    log({ kind: "schema", what: "line", problems: ["not JSON"], raw: line });
    return;
  }
  if (message.method === "session/update") check("session/update", schema.zSessionNotification, message.params);
  if (message.method === "session/request_permission")
    check("session/request_permission", schema.zRequestPermissionRequest, message.params);
});
const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(toSdk));

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
  })
  .onRequest(acp.methods.client.elicitation.create, async ({ params }) => {
    // ACP_FORM: the content to accept a form with (JSON); `decline` declines.
    const form = process.env.ACP_FORM ?? "decline";
    log({ kind: "elicitation", params });
    if (form === "decline") return { action: "decline" };
    return { action: "accept", content: JSON.parse(form) };
  });

const failed = (step, e) =>
  log({ kind: "error", op: step.op, code: e?.code ?? null, message: String(e?.message ?? e) });

// Each op's method and the schema of its result.
const calls = {
  initialize: [acp.methods.agent.initialize, schema.zInitializeResponse],
  authenticate: [acp.methods.agent.authenticate, schema.zAuthenticateResponse],
  new: [acp.methods.agent.session.new, schema.zNewSessionResponse],
  load: [acp.methods.agent.session.load, schema.zLoadSessionResponse],
  resume: [acp.methods.agent.session.resume, schema.zResumeSessionResponse],
  fork: [acp.methods.agent.session.fork, schema.zForkSessionResponse],
  prompt: [acp.methods.agent.session.prompt, schema.zPromptResponse],
  list: [acp.methods.agent.session.list, schema.zListSessionsResponse],
  set_mode: [acp.methods.agent.session.setMode, schema.zSetSessionModeResponse],
};

await app.connectWith(stream, async (ctx) => {
  let session = null;
  const call = async (step, params) => {
    const [method, zod] = calls[step.op];
    if (!method) throw new Error(`${step.op} is not in this SDK entrypoint (ACP_UNSTABLE?)`);
    const r = await ctx.request(method, params);
    check(`${step.op} result`, zod, r);
    log({ kind: "result", op: step.op, result: r });
    return r;
  };
  for (const step of steps) {
    const sid = step.session ?? session;
    try {
      switch (step.op) {
        case "initialize": {
          await call(step, {
            protocolVersion: step.protocolVersion ?? acp.PROTOCOL_VERSION,
            clientCapabilities: step.clientCapabilities ?? {
              fs: { readTextFile: false, writeTextFile: false },
              terminal: false,
            },
          });
          break;
        }
        case "authenticate": {
          await call(step, { methodId: step.methodId });
          break;
        }
        case "new": {
          const r = await call(step, { cwd: step.cwd, mcpServers: step.mcpServers ?? [] });
          session = r.sessionId;
          break;
        }
        case "load":
        case "resume": {
          await call(step, { sessionId: sid, cwd: step.cwd, mcpServers: [] });
          session = sid;
          break;
        }
        case "fork": {
          const r = await call(step, { sessionId: sid, cwd: step.cwd, mcpServers: [] });
          session = r.sessionId;
          break;
        }
        case "prompt": {
          if (step.cancelOnChunk) {
            onChunk = () => ctx.notify(acp.methods.agent.session.cancel, { sessionId: sid });
          }
          const prompt = step.blocks ?? [{ type: "text", text: step.text }];
          await call(step, { sessionId: sid, prompt });
          break;
        }
        case "list": {
          await call(step, step.cwd ? { cwd: step.cwd } : {});
          break;
        }
        case "set_mode": {
          await call(step, { sessionId: sid, modeId: step.mode });
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
const agentExit = await exited;
log({ kind: "done", agentExit });
process.exit(0);
