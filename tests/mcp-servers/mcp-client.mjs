// An MCP client on the official TypeScript SDK v2 (@modelcontextprotocol/client), for amber's
// end-to-end tests of `amber-cli mcp-server` (tests/tests/mcp_server.rs). It connects over
// Streamable HTTP (MCP_URL) or stdio (the command after `--`), in the era MCP_VERSION asks
// for ("2026-07-28": the stateless revision; "legacy": the initialize handshake), lists the
// tools, makes the call MCP_CALL names ({name, arguments}) if any, and prints one JSON line
// per thing that happened: {kind: "connected", protocolVersion}, {kind: "tools", names},
// {kind: "result", result}, or {kind: "error", message} (then exits 1).
//
//   MCP_URL=http://127.0.0.1:PORT/mcp?token=T MCP_VERSION=2026-07-28 node mcp-client.mjs
//   MCP_HEADERS='{"Authorization":"Bearer T"}'   (extra HTTP headers)
//   node mcp-client.mjs -- amber-cli mcp-server
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const log = (entry) => process.stdout.write(JSON.stringify(entry) + "\n");
const version = process.env.MCP_VERSION ?? "2026-07-28";
const mode = version === "legacy" ? "legacy" : { pin: version };

try {
  const client = new Client(
    { name: "amber-e2e-sdk-client", version: "1.0.0" },
    { versionNegotiation: { mode } },
  );
  let transport;
  if (process.env.MCP_URL) {
    const headers = JSON.parse(process.env.MCP_HEADERS ?? "{}");
    transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
      requestInit: { headers },
    });
  } else {
    const argv = process.argv.slice(process.argv.indexOf("--") + 1);
    transport = new StdioClientTransport({
      command: argv[0],
      args: argv.slice(1),
      env: process.env,
      stderr: "inherit",
    });
  }
  await client.connect(transport);
  log({ kind: "connected", protocolVersion: client.getNegotiatedProtocolVersion() });
  const { tools } = await client.listTools();
  log({ kind: "tools", names: tools.map((t) => t.name) });
  if (process.env.MCP_CALL) {
    const call = JSON.parse(process.env.MCP_CALL);
    const result = await client.callTool(call, { timeout: 60000 });
    log({ kind: "result", result });
  }
  await client.close();
  process.exit(0);
} catch (error) {
  log({ kind: "error", message: String(error?.message ?? error) });
  process.exit(1);
}
