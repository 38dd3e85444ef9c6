/**
 * `lectern mcp`: the MCP server over stdio, for desktop clients that start it as a child process.
 * It serves the store here (DATA_DIR, or DATABASE_URL) in this process, as the index commands do, so
 * it needs no running app and no key: whoever can start it can read that store anyway. Answers are
 * written by GENERATION_URL's model when it is set, else extractive (as `lectern ask --local`).
 * Stdout carries only the protocol; anything logged goes to stderr. It ends when stdin closes.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Config } from "../../core/config.js";
import { answerWriterFor } from "../answering/generative.js";
import { generationPortFor } from "../answering/upstream-generation.js";
import { Retrievers } from "../retrieval/retrievers.js";
import { RagService } from "../service.js";
import { openIndexStore } from "../store/open.js";
import { createMcpServer } from "./server.js";

const stderrLog = {
  error(details: object, message: string) {
    const err = (details as { err?: unknown }).err;
    process.stderr.write(`lectern mcp: ${message}: ${err instanceof Error ? err.message : String(err)}\n`);
  },
};

/** Serves MCP on stdin/stdout until stdin ends; `tenant` is the tenant of calls that name none. */
export async function serveMcpStdio(config: Config, tenant: string): Promise<void> {
  const store = await openIndexStore(config.rag);
  const service = new RagService(store);
  const answerWriter = answerWriterFor(generationPortFor(config.generation, undefined));
  const retrievers = new Retrievers(config.rag);
  const deps = {
    service,
    answerWriter,
    retrievers,
    maxBuildDocuments: config.ingest.maxBuildDocuments,
    maxBuildChars: config.ingest.maxBuildChars,
  };
  const server = createMcpServer(deps, { principal: null, defaultTenant: tenant, log: stderrLog });
  try {
    const closed = new Promise<void>((resolve) => {
      // The transport does not watch for the end of its input: the client closing stdin ends the server.
      process.stdin.once("end", resolve);
      process.stdin.once("close", resolve);
      server.server.onclose = resolve;
    });
    await server.connect(new StdioServerTransport());
    await closed;
  } finally {
    await server.close();
    // The service first: it waits for a background merge, which must not find the store closed.
    await service.close();
    await answerWriter?.close();
    await retrievers.close();
    await store.close();
  }
}
