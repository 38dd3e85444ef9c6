/**
 * The MCP resources of the RAG app: each index of the caller's tenant as `lectern://{index}` (its
 * figures and documents, JSON) and each document as `lectern://{index}/{document}` (its text). Ids
 * are percent-encoded in the URIs, so any document id (slashes included) makes one path segment.
 * Listings are capped (LISTED): a client reads further documents by their URIs, which list_indices
 * and search give.
 */
import { ErrorCode, type ReadResourceResult } from "@modelcontextprotocol/sdk/types.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { toApiError } from "../../core/http.js";
import { indexInfo } from "../http/index-routes.js";
import type { RagService } from "../service.js";
import type { IndexKey } from "../store/types.js";
import { readDocument, stitch } from "./documents.js";

/** Resources one listing names at most (indices, or documents over all indices). */
const LISTED = 1000;
/** JSON-RPC's code for a resource that does not exist (MCP spec, resources: error handling). */
const RESOURCE_NOT_FOUND = -32002;

/**
 * A JSON-RPC error the SDK sends with its code and message as they are (an McpError's message would
 * carry its "MCP error <code>:" prefix, which the client adds again).
 */
const rpcError = (code: number, message: string) => Object.assign(new Error(message), { code });

const indexUri = (index: string) => `lectern://${encodeURIComponent(index)}`;
const documentUri = (index: string, id: string) => `${indexUri(index)}/${encodeURIComponent(id)}`;

function variable(value: string | string[] | undefined): string {
  const text = Array.isArray(value) ? value.join(",") : (value ?? "");
  try {
    return decodeURIComponent(text);
  } catch {
    throw rpcError(ErrorCode.InvalidParams, `"${text}" is not a percent-encoded name`);
  }
}

/** A failed read as its JSON-RPC error (reads have no tool-error form), in the API's words. */
async function reading<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (typeof (error as { code?: unknown }).code === "number") throw error;
    const apiError = toApiError(error);
    const code =
      apiError.statusCode === 404
        ? RESOURCE_NOT_FOUND
        : apiError.statusCode < 500
          ? ErrorCode.InvalidParams
          : ErrorCode.InternalError;
    throw rpcError(code, apiError.message);
  }
}

export function registerResources(
  server: McpServer,
  deps: { service: RagService },
  caller: { tenant: string },
): void {
  const { service } = deps;
  const keyOf = (index: string): IndexKey => ({ tenantId: caller.tenant, name: index });
  server.registerResource(
    "index",
    new ResourceTemplate("lectern://{index}", {
      list: async () => ({
        resources: (await service.listIndices(caller.tenant)).slice(0, LISTED).map((meta) => ({
          uri: indexUri(meta.name),
          name: meta.name,
          description: `Index "${meta.name}": ${meta.documentsCount} documents, ${meta.chunksCount} chunks`,
          mimeType: "application/json",
        })),
      }),
    }),
    {
      title: "Index",
      description: "An index's figures and the ids and URIs of its documents (JSON)",
      mimeType: "application/json",
    },
    (uri, variables) =>
      reading(async () => {
        const key = keyOf(variable(variables.index));
        const meta = await service.requireMeta(key);
        const documents = (await service.listDocuments(key)).slice(0, LISTED);
        const body = {
          ...indexInfo(meta),
          documents: documents.map((doc) => ({ id: doc.id, uri: documentUri(key.name, doc.id) })),
          documents_listed: documents.length,
        };
        return jsonContents(uri.href, body);
      }),
  );
  server.registerResource(
    "document",
    new ResourceTemplate("lectern://{index}/{document}", {
      list: async () => listDocuments(service, caller.tenant),
    }),
    { title: "Document", description: "A document's text, as its chunks hold it", mimeType: "text/plain" },
    (uri, variables) =>
      reading(async () => {
        const document = await readDocument(
          service,
          keyOf(variable(variables.index)),
          variable(variables.document),
        );
        return { contents: [{ uri: uri.href, mimeType: "text/plain", text: stitch(document.chunks) }] };
      }),
  );
}

function jsonContents(uri: string, body: object): ReadResourceResult {
  return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(body) }] };
}

async function listDocuments(service: RagService, tenant: string) {
  const resources = [];
  for (const meta of await service.listIndices(tenant)) {
    // From the store: an index deleted since it was listed gives no documents, not a failure.
    for (const doc of await service.store.listDocuments({ tenantId: tenant, name: meta.name })) {
      if (resources.length >= LISTED) return { resources };
      resources.push({
        uri: documentUri(meta.name, doc.id),
        name: doc.id,
        description: `Document "${doc.id}" of index "${meta.name}"${doc.source ? ` (${doc.source})` : ""}`,
        mimeType: "text/plain",
      });
    }
  }
  return { resources };
}
