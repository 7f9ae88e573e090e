// A stdio MCP server on the official TypeScript SDK v2 (@modelcontextprotocol/server), for
// amber's MCP host tests (tests/tests/mcp.rs): it speaks the stateless 2026-07-28 revision
// (`server/discover`, per-request `_meta`) and, for an `initialize` opening, 2025-11-25.
// MODERN_ONLY=1 refuses the initialize era, so only a client of the stateless revision gets in.
//
// Tool `shout {text}`: the text upper-cased.
import { McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import * as z from "zod";

serveStdio(
  () => {
    const server = new McpServer(
      { name: "modern", version: "1.0.0" },
      { capabilities: { tools: {} } },
    );
    server.registerTool(
      "shout",
      {
        description: "Upper-cases a text",
        inputSchema: z.object({ text: z.string() }),
        annotations: { readOnlyHint: true },
      },
      async ({ text }) => ({ content: [{ type: "text", text: text.toUpperCase() }] }),
    );
    return server;
  },
  { legacy: process.env.MODERN_ONLY ? "reject" : "serve" },
);
