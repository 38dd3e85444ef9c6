/**
 * The RAG app as an MCP server (issue #37): tools and resources over the same service and answering
 * functions the /rag routes call, so `search` gives what POST /rag/query gives for the same question
 * and `add_document` writes as POST /rag/indices/{name}/documents does. One server per caller: its
 * principal (the API key's tenant and scopes, or none with auth off and over stdio) decides, as on
 * the routes, whose indices it sees. Failures come back as tool errors (`isError`), in the API's
 * codes and messages; the session goes on.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { mayWrite, principalListingTenant, principalTenant, type Principal } from "../../core/auth.js";
import { forbidden } from "../../core/errors.js";
import { toApiError } from "../../core/http.js";
import { NAME_PATTERN } from "../../core/validation.js";
import { VERSION } from "../../core/version.js";
import { ask, type AnsweringDeps } from "../answering/ask.js";
import { indexInfo } from "../http/index-routes.js";
import { addDocuments, toDocumentInputs, type DocumentWriteDeps } from "../http/write-requests.js";
import type { IndexKey } from "../store/types.js";
import { passageWindow, readDocument, textPage } from "./documents.js";
import { registerResources } from "./resources.js";

export type McpDeps = AnsweringDeps & DocumentWriteDeps;

export interface McpLog {
  error(details: object, message: string): void;
}

/** Who calls: the key's principal (null with auth off, and over stdio), and the tenant used then. */
export interface McpCaller {
  principal: Principal | null;
  /** The tenant of a caller without a principal that names none ("default", or `lectern mcp --tenant`). */
  defaultTenant: string;
  log: McpLog;
}

const INSTRUCTIONS =
  "Lectern searches document collections (indices) and answers questions from them. Call list_indices " +
  "to see the indices, then search (ranked passages) or ask (an answer citing its passages). Passages " +
  "carry a document_id and chunk_id: fetch_document reads the text around a passage or a whole document.";

const name = (what: string) => z.string().regex(new RegExp(NAME_PATTERN)).describe(what);
const tenantField = name(
  "act for this tenant: only for admin keys (or with auth off); leave out to use your own",
).optional();
const indexField = name("the index's name, as list_indices gives it");
const retrievalFields = {
  top_k: z.number().int().min(1).max(100).default(5).describe("passages to return (1 … 100)"),
  min_score: z
    .number()
    .min(0)
    .max(1)
    .default(0)
    .describe("least first-stage score (0 … 1) a passage must have"),
  filter: z
    .record(z.string(), z.unknown())
    .optional()
    .describe(
      'metadata equality: only passages whose document metadata has these values, e.g. {"lang": "en"}',
    ),
  retrieval: z
    .enum(["lexical", "dense", "hybrid"])
    .optional()
    .describe(
      "lexical: keywords (BM25/TF-IDF); dense: meaning (embeddings); hybrid: both fused. Default hybrid when the index has embeddings, else lexical",
    ),
  expand: z.boolean().optional().describe("widen a keyword query with terms of its best results (RM3)"),
  rerank: z.boolean().optional().describe("rescore the candidates with the reranker, when one is configured"),
};

/** A tool's value as MCP gives it: the JSON for the model, and the same as structured content. */
const toolResult = (value: object): CallToolResult => ({
  content: [{ type: "text", text: JSON.stringify(value) }],
  structuredContent: value as Record<string, unknown>,
});

/** Runs a tool; any failure is a tool error with the API's code and message (500s logged, details not shown). */
async function run(caller: McpCaller, tool: string, work: () => Promise<object>): Promise<CallToolResult> {
  try {
    return toolResult(await work());
  } catch (error) {
    const apiError = toApiError(error);
    if (apiError.statusCode >= 500) caller.log.error({ err: error, tool }, "MCP tool failed");
    return { isError: true, content: [{ type: "text", text: `${apiError.code}: ${apiError.message}` }] };
  }
}

export function createMcpServer(deps: McpDeps, caller: McpCaller): McpServer {
  const server = new McpServer(
    { name: "lectern-rag", title: "Lectern RAG", version: VERSION },
    { instructions: INSTRUCTIONS },
  );
  const keyOf = (index: string, tenant: string | undefined): IndexKey => ({
    tenantId: principalTenant(caller.principal, tenant, caller.defaultTenant),
    name: index,
  });
  registerReadTools(server, deps, caller, keyOf);
  registerDocumentTools(server, deps, caller, keyOf);
  // Resource URIs name no tenant: they are the caller's own (an admin key's too).
  registerResources(server, deps, {
    tenant: principalTenant(caller.principal, undefined, caller.defaultTenant),
  });
  return server;
}

type KeyOf = (index: string, tenant: string | undefined) => IndexKey;

function registerReadTools(server: McpServer, deps: McpDeps, caller: McpCaller, keyOf: KeyOf): void {
  const readOnly = { readOnlyHint: true, openWorldHint: false };
  server.registerTool(
    "list_indices",
    {
      title: "List indices",
      description:
        "The indices (document collections) you can search: name, document and chunk counts, whether it has embeddings (dense retrieval), dates.",
      inputSchema: z.strictObject({ tenant_id: tenantField }),
      annotations: readOnly,
    },
    (args) =>
      run(caller, "list_indices", async () => {
        const tenant = principalListingTenant(caller.principal, args.tenant_id, caller.defaultTenant);
        const indices = await deps.service.listIndices(tenant);
        return { indices: indices.map(indexInfo), count: indices.length };
      }),
  );
  server.registerTool(
    "search",
    {
      title: "Search an index",
      description:
        "Find the passages of an index that best match a query, best first. Each result has the passage text, score, document_id, chunk_id, title, file, and metadata (where it lies: a PDF's page or pages, start and end offsets in the document's text, a heading path). Use the words the documents would use; pass a chunk_id to fetch_document to read around a passage.",
      inputSchema: z.strictObject({
        index: indexField,
        query: z.string().min(1).max(4096).describe("what to look for: keywords or a question"),
        ...retrievalFields,
        tenant_id: tenantField,
      }),
      annotations: readOnly,
    },
    ({ index, query, tenant_id, ...fields }, extra) =>
      run(caller, "search", async () => {
        // The answering use case with no answer: the search POST /rag/query runs, counted the same.
        const key = keyOf(index, tenant_id);
        const found = await ask(deps, { ...fields, key, query, answer: "none" }, { signal: extra.signal })
          .result;
        const { answer: _answer, answer_mode: _mode, ...searched } = found;
        return searched;
      }),
  );
  server.registerTool(
    "ask",
    {
      title: "Answer a question from an index",
      description:
        "Answer a question from an index's passages: written by the configured model citing the passages it used (citations are 1-based result numbers), or, without a model, composed of the passages' best-matching sentences. The results it answered from come with it.",
      inputSchema: z.strictObject({
        index: indexField,
        question: z.string().min(1).max(4096).describe("the question, standing on its own"),
        ...retrievalFields,
        answer: z
          .enum(["extractive", "generative"])
          .optional()
          .describe(
            "generative: written by the model (default when one is configured); extractive: quoted sentences",
          ),
        tenant_id: tenantField,
      }),
      annotations: readOnly,
    },
    ({ index, question, tenant_id, ...fields }, extra) =>
      run(
        caller,
        "ask",
        () =>
          ask(deps, { ...fields, key: keyOf(index, tenant_id), query: question }, { signal: extra.signal })
            .result,
      ),
  );
}

function registerDocumentTools(server: McpServer, deps: McpDeps, caller: McpCaller, keyOf: KeyOf): void {
  server.registerTool(
    "fetch_document",
    {
      title: "Read a document",
      description:
        "A document's text. With chunk_id (from search or ask results): that passage and `window` passages either side. Without: the whole text from `offset`, at most max_chars characters; `next_offset` says where to go on when it was cut.",
      inputSchema: z.strictObject({
        index: indexField,
        document_id: z.string().min(1).max(512).describe("the document's id (document_id in search results)"),
        chunk_id: z
          .string()
          .min(1)
          .max(600)
          .optional()
          .describe('a passage\'s chunk_id, "<document_id>#<n>"'),
        window: z.number().int().min(0).max(20).default(1).describe("passages either side of chunk_id"),
        offset: z.number().int().min(0).default(0).describe("first character, without chunk_id"),
        max_chars: z
          .number()
          .int()
          .min(1)
          .max(200_000)
          .default(20_000)
          .describe("characters, without chunk_id"),
        tenant_id: tenantField,
      }),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) =>
      run(caller, "fetch_document", async () => {
        const document = await readDocument(
          deps.service,
          keyOf(args.index, args.tenant_id),
          args.document_id,
        );
        return args.chunk_id === undefined
          ? textPage(document, args.offset, args.max_chars)
          : passageWindow(document, args.chunk_id, args.window);
      }),
  );
  server.registerTool(
    "add_document",
    {
      title: "Add a document to an index",
      description:
        "Add a text document to an existing index (it is chunked and indexed at once), replacing the document with the same id. Needs a key with the write scope.",
      inputSchema: z.strictObject({
        index: indexField,
        text: z.string().min(1).describe("the document's text"),
        id: z.string().min(1).max(512).optional().describe("your id; a content hash when left out"),
        title: z.string().max(4096).optional(),
        metadata: z.record(z.string(), z.unknown()).optional().describe("any JSON object, for filters"),
        tenant_id: tenantField,
      }),
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
    ({ index, tenant_id, ...document }) =>
      run(caller, "add_document", async () => {
        if (!mayWrite(caller.principal))
          throw forbidden('Adding documents over MCP needs a key with the "write" (or "admin") scope');
        return addDocuments(deps, keyOf(index, tenant_id), toDocumentInputs([document]), undefined);
      }),
  );
}
