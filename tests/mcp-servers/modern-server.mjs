// A stdio MCP server on the official TypeScript SDK v2 (@modelcontextprotocol/server), for
// amber's MCP host tests (tests/tests/mcp.rs): it speaks the stateless 2026-07-28 revision
// (`server/discover`, per-request `_meta`) and, for an `initialize` opening, 2025-11-25.
// MODERN_ONLY=1 refuses the initialize era, so only a client of the stateless revision gets in.
//
// Tools: `shout {text}`: the text upper-cased; `greet {}`: asks the client for a name
// (an `input_required` elicitation in the stateless revision) and greets it.
import { McpServer, inputRequired, acceptedContent } from "@modelcontextprotocol/server";
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
    const nameSchema = z.object({ name: z.string() });
    server.registerTool(
      "greet",
      { description: "Greets whoever the client names", inputSchema: z.object({}) },
      async (_args, ctx) => {
        const given = acceptedContent(ctx.mcpReq.inputResponses, "who", nameSchema);
        if (!given) {
          if (ctx.mcpReq.inputResponses?.who) {
            return { content: [{ type: "text", text: "no name given: declined" }] };
          }
          return inputRequired({
            inputRequests: {
              who: inputRequired.elicit({ message: "Who should I greet?", requestedSchema: nameSchema }),
            },
          });
        }
        return { content: [{ type: "text", text: `Hello, ${given.name}!` }] };
      },
    );
    return server;
  },
  { legacy: process.env.MODERN_ONLY ? "reject" : "serve" },
);
