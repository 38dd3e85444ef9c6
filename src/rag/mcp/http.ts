/**
 * /mcp: the MCP server over Streamable HTTP (MCP spec 2025-06-18 and later), behind the same API keys
 * as every route (core/auth.ts runs first: no key, 401). Two modes (MCP_SESSIONS):
 * - off (default), stateless: each POST gets a server of its own for the request's key, answered
 *   with JSON; GET and DELETE are 405 (no stream to open, no session to end). Any replica serves any
 *   request.
 * - on: `initialize` opens a session (Mcp-Session-Id) kept in this process, answered over server-sent
 *   events; the session belongs to the key that opened it, and another key (or none) presenting its
 *   id is told it does not exist (404), as a client whose session ended is. Sessions idle for
 *   SESSION_IDLE_MS end; past MAX_SESSIONS the least recently used ends.
 * The SDK's transport writes the reply itself (the reply is hijacked), with the headers the app's
 * hooks set so far (CORS among them).
 */
import { randomUUID } from "node:crypto";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { createMcpServer, type McpDeps } from "./server.js";

export interface McpRouteOptions extends McpDeps {
  sessions: boolean;
  /** Body limit of POST /mcp (add_document carries a document): the document routes' limit. */
  largeBodyLimit: number;
}

const MAX_SESSIONS = 1000;
const SESSION_IDLE_MS = 30 * 60_000;

interface Session {
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  /** The key that opened the session (null with auth off). */
  keyId: string | null;
  lastUsed: number;
}

const hide = { schema: { hide: true } };

/** A JSON-RPC error reply, as the SDK's transport answers its own refusals. */
function rpcError(
  reply: FastifyReply,
  status: number,
  message: string,
  headers: Record<string, string> = {},
) {
  return reply
    .code(status)
    .headers(headers)
    .type("application/json")
    .send({ jsonrpc: "2.0", error: { code: -32000, message }, id: null });
}

/** Hands the request to the transport: the headers set so far go with the reply it writes. */
async function handOver(
  request: FastifyRequest,
  reply: FastifyReply,
  transport: StreamableHTTPServerTransport,
): Promise<void> {
  // A browser client of an allowed origin (CORS_ORIGINS) must read the session id to send it back.
  const exposed = reply.getHeader("access-control-expose-headers");
  if (typeof exposed === "string")
    void reply.header("access-control-expose-headers", `${exposed}, mcp-session-id, mcp-protocol-version`);
  for (const [name, value] of Object.entries(reply.getHeaders()))
    if (value !== undefined) reply.raw.setHeader(name, value as string | number | string[]);
  reply.hijack();
  await transport.handleRequest(request.raw, reply.raw, request.body);
}

const callerOf = (request: FastifyRequest) => ({
  principal: request.principal,
  defaultTenant: "default",
  log: request.log,
});

export const mcpRoutes: FastifyPluginAsync<McpRouteOptions> = async (app, options) => {
  if (options.sessions) await app.register(sessionRoutes, options);
  else await app.register(statelessRoutes, options);
};

const statelessRoutes: FastifyPluginAsync<McpRouteOptions> = async (app, deps) => {
  app.post("/mcp", { ...hide, bodyLimit: deps.largeBodyLimit }, async (request, reply) => {
    const server = createMcpServer(deps, callerOf(request));
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    reply.raw.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await handOver(request, reply, transport);
  });
  const notAllowed = async (_request: FastifyRequest, reply: FastifyReply) =>
    rpcError(reply, 405, "Method not allowed: this server is stateless (MCP_SESSIONS=off); POST only", {
      allow: "POST",
    });
  app.get("/mcp", hide, notAllowed);
  app.delete("/mcp", hide, notAllowed);
};

const sessionRoutes: FastifyPluginAsync<McpRouteOptions> = async (app, deps) => {
  const sessions = new Map<string, Session>();
  const end = (id: string) => {
    const session = sessions.get(id);
    sessions.delete(id);
    void session?.transport.close();
    void session?.server.close();
  };
  const makeRoom = (now: number) => {
    for (const [id, session] of sessions) if (now - session.lastUsed > SESSION_IDLE_MS) end(id);
    // Map order is insertion order, refreshed on use (below): the first is the least recently used.
    while (sessions.size >= MAX_SESSIONS) end(sessions.keys().next().value!);
  };
  /** The session a request names, if it is the caller's; refreshed as most recently used. */
  const sessionOf = (request: FastifyRequest): Session | undefined => {
    const id = request.headers["mcp-session-id"];
    const session = typeof id === "string" ? sessions.get(id) : undefined;
    if (!session || session.keyId !== (request.principal?.keyId ?? null)) return undefined;
    sessions.delete(id as string);
    sessions.set(id as string, session);
    session.lastUsed = Date.now();
    return session;
  };
  const open = async (request: FastifyRequest, reply: FastifyReply) => {
    makeRoom(Date.now());
    const server = createMcpServer(deps, callerOf(request));
    const keyId = request.principal?.keyId ?? null;
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server, keyId, lastUsed: Date.now() });
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await handOver(request, reply, transport);
  };
  app.post("/mcp", { ...hide, bodyLimit: deps.largeBodyLimit }, async (request, reply) => {
    if (request.headers["mcp-session-id"] === undefined) {
      if (isInitializeRequest(request.body)) return open(request, reply);
      return rpcError(reply, 400, "No session: send initialize first (MCP_SESSIONS=on)");
    }
    return forSession(request, reply);
  });
  const forSession = async (request: FastifyRequest, reply: FastifyReply) => {
    const session = sessionOf(request);
    if (!session) return rpcError(reply, 404, "Session not found: it ended, or belongs to another key");
    await handOver(request, reply, session.transport);
  };
  app.get("/mcp", hide, forSession);
  app.delete("/mcp", hide, forSession);
  app.addHook("onClose", async () => {
    for (const id of [...sessions.keys()]) end(id);
  });
};
