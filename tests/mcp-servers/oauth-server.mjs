// An MCP server that requires OAuth, for amber's end-to-end tests (tests/tests/mcp_oauth.rs):
// the protected resource is built with the official TypeScript SDK v2's server auth helpers
// (`oauthMetadataResponse` for RFC 9728 / RFC 8414 discovery, `requireBearerAuth` for the 401
// challenge and token checks, `createMcpHandler` for MCP itself); beside it, on the same port,
// a small authorization server: dynamic client registration, an authorization endpoint that
// approves at once (the person's browser is the test's curl), a token endpoint that checks
// PKCE (S256) and hands out refresh tokens.
//
// Prints its MCP URL as the first stdout line, then one JSON line per token it issues:
// {"event": "token", "grant": "authorization_code" | "refresh_token", "accessToken": …}.
// ACCESS_TTL: seconds an access token lives (default 3600). Tool `whoami`: the client id.
import http from "node:http";
import { createHash, randomBytes } from "node:crypto";
import * as z from "zod";
import {
  McpServer,
  createMcpHandler,
  oauthMetadataResponse,
  requireBearerAuth,
  getOAuthProtectedResourceMetadataUrl,
  OAuthError,
  OAuthErrorCode,
} from "@modelcontextprotocol/server";

const ttl = Number(process.env.ACCESS_TTL ?? "3600");
const clients = new Map(); // client_id -> metadata
const codes = new Map(); // code -> {clientId, challenge, redirectUri, scope}
const tokens = new Map(); // access token -> {clientId, scopes, expiresAt}
const refreshTokens = new Map(); // refresh token -> {clientId, scopes}
const token = () => randomBytes(24).toString("hex");

const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks);
  const url = new URL(req.url, base);
  const request = new Request(url, {
    method: req.method,
    headers: req.headers,
    body: ["GET", "HEAD"].includes(req.method) ? undefined : body,
  });
  let response;
  try {
    response = await route(request, url, body);
  } catch (error) {
    response = new Response(String(error), { status: 500 });
  }
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
});

let base;
let authOptions;
let gate;
const handler = createMcpHandler(() => {
  const mcp = new McpServer({ name: "oauth-protected", version: "1.0.0" }, { capabilities: { tools: {} } });
  mcp.registerTool(
    "whoami",
    { description: "Says which OAuth client called", inputSchema: z.object({}), annotations: { readOnlyHint: true } },
    async (_args, ctx) => ({
      content: [{ type: "text", text: `signed in as ${ctx?.http?.authInfo?.clientId ?? ctx?.authInfo?.clientId ?? "someone"}` }],
    }),
  );
  return mcp;
});

function json(value, status = 200) {
  return new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json" } });
}

async function route(request, url, body) {
  const metadata = oauthMetadataResponse(request, authOptions);
  if (metadata) return metadata;
  if (url.pathname === "/register" && request.method === "POST") {
    const meta = JSON.parse(body.toString() || "{}");
    const clientId = `client-${token().slice(0, 8)}`;
    clients.set(clientId, meta);
    return json({ ...meta, client_id: clientId, client_id_issued_at: Math.floor(Date.now() / 1000), token_endpoint_auth_method: "none" }, 201);
  }
  if (url.pathname === "/authorize") {
    const p = url.searchParams;
    if (!clients.has(p.get("client_id"))) return json({ error: "invalid_client" }, 400);
    if (p.get("code_challenge_method") !== "S256" || !p.get("code_challenge")) return json({ error: "invalid_request", error_description: "PKCE S256 required" }, 400);
    const code = token();
    codes.set(code, { clientId: p.get("client_id"), challenge: p.get("code_challenge"), redirectUri: p.get("redirect_uri"), scope: p.get("scope") ?? "mcp" });
    const back = new URL(p.get("redirect_uri"));
    back.searchParams.set("code", code);
    if (p.get("state")) back.searchParams.set("state", p.get("state"));
    back.searchParams.set("iss", base.href.replace(/\/$/, ""));
    return new Response(null, { status: 302, headers: { location: back.href } });
  }
  if (url.pathname === "/token" && request.method === "POST") {
    const p = new URLSearchParams(body.toString());
    let clientId, scopes;
    if (p.get("grant_type") === "authorization_code") {
      const entry = codes.get(p.get("code"));
      codes.delete(p.get("code"));
      if (!entry) return json({ error: "invalid_grant" }, 400);
      const verifier = p.get("code_verifier") ?? "";
      const challenge = createHash("sha256").update(verifier).digest("base64url");
      if (challenge !== entry.challenge) return json({ error: "invalid_grant", error_description: "PKCE mismatch" }, 400);
      if (p.get("redirect_uri") && p.get("redirect_uri") !== entry.redirectUri) return json({ error: "invalid_grant" }, 400);
      clientId = entry.clientId;
      scopes = entry.scope.split(" ");
    } else if (p.get("grant_type") === "refresh_token") {
      const entry = refreshTokens.get(p.get("refresh_token"));
      if (!entry) return json({ error: "invalid_grant" }, 400);
      refreshTokens.delete(p.get("refresh_token"));
      ({ clientId, scopes } = entry);
    } else {
      return json({ error: "unsupported_grant_type" }, 400);
    }
    const access = token();
    const refresh = token();
    tokens.set(access, { clientId, scopes, expiresAt: Math.floor(Date.now() / 1000) + ttl });
    refreshTokens.set(refresh, { clientId, scopes });
    process.stdout.write(JSON.stringify({ event: "token", grant: p.get("grant_type"), accessToken: access, refreshToken: refresh }) + "\n");
    return json({ access_token: access, token_type: "Bearer", expires_in: ttl, refresh_token: refresh, scope: scopes.join(" ") });
  }
  if (url.pathname === "/mcp") {
    const auth = await gate(request);
    if (auth instanceof Response) return auth;
    return handler.fetch(request, { authInfo: auth });
  }
  return new Response("not found", { status: 404 });
}

server.listen(0, "127.0.0.1", () => {
  base = new URL(`http://127.0.0.1:${server.address().port}/`);
  const mcpUrl = new URL("/mcp", base);
  authOptions = {
    oauthMetadata: {
      issuer: base.href.replace(/\/$/, ""),
      authorization_endpoint: new URL("/authorize", base).href,
      token_endpoint: new URL("/token", base).href,
      registration_endpoint: new URL("/register", base).href,
      response_types_supported: ["code"],
      grant_types_supported: ["authorization_code", "refresh_token"],
      code_challenge_methods_supported: ["S256"],
      token_endpoint_auth_methods_supported: ["none"],
      scopes_supported: ["mcp"],
    },
    resourceServerUrl: mcpUrl,
    scopesSupported: ["mcp"],
    dangerouslyAllowInsecureIssuerUrl: true,
  };
  gate = requireBearerAuth({
    verifier: {
      async verifyAccessToken(presented) {
        const entry = tokens.get(presented);
        if (!entry || entry.expiresAt <= Math.floor(Date.now() / 1000)) {
          throw new OAuthError(OAuthErrorCode.InvalidToken, "unknown or expired token");
        }
        return { token: presented, clientId: entry.clientId, scopes: entry.scopes, expiresAt: entry.expiresAt };
      },
    },
    resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl),
  });
  process.stdout.write(mcpUrl.href + "\n");
});
