/**
 * Request and response schemas of the RAG API: at once the TypeScript types, the validation and the
 * OpenAPI document.
 */
import { Type, type Static } from "typebox";
import { NAME_PATTERN } from "../../core/validation.js";
import {
  AskResponse,
  ChatTurns,
  ConverseResponse,
  QueryResultSchema,
  searchAndAnswerFields,
  searchPlanFields,
} from "../answering/schemas.js";
import { EmbeddingsField } from "../retrieval/schemas.js";
import { CHUNK_SIZE_RANGE, DEFAULT_CHUNK_SIZE, DEFAULT_SCORER, MAX_OVERLAP } from "../service/settings.js";

export { NAME_PATTERN };
export const IndexName = Type.String({
  pattern: NAME_PATTERN,
  description: "letters, digits, . _ -; 1 … 128 characters; not . or ..",
});
export const TenantId = Type.String({ pattern: NAME_PATTERN, description: 'defaults to "default"' });
/** Every request field is declared: an unknown one ("topk") is a 400 naming it, never ignored. */
const strict = { additionalProperties: false } as const;
const Metadata = Type.Record(Type.String(), Type.Unknown(), { description: "any JSON object" });

export const DocumentInput = Type.Union([
  Type.String({ minLength: 1, description: "the document's text" }),
  Type.Object(
    {
      id: Type.Optional(
        Type.String({ minLength: 1, maxLength: 512, description: "your id; a content hash when left out" }),
      ),
      text: Type.String({ minLength: 1 }),
      title: Type.Optional(Type.Union([Type.String({ maxLength: 4096 }), Type.Null()])),
      metadata: Type.Optional(Metadata),
    },
    strict,
  ),
]);
export type DocumentInput = Static<typeof DocumentInput>;

export const BuildRequest = Type.Object(
  {
    index_name: IndexName,
    tenant_id: Type.Optional(TenantId),
    documents: Type.Optional(Type.Array(DocumentInput, { maxItems: 1_000_000 })),
    files: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), {
        maxItems: 100_000,
        description: "paths under RAG_FILES_DIR",
      }),
    ),
    chunk_size: Type.Integer({ ...CHUNK_SIZE_RANGE, default: DEFAULT_CHUNK_SIZE }),
    overlap: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_OVERLAP,
        description: "0 … chunk_size/2; default min(128, chunk_size/2)",
      }),
    ),
    scorer: Type.Union([Type.Literal("tfidf"), Type.Literal("bm25")], { default: DEFAULT_SCORER }),
    mode: Type.Union([Type.Literal("create"), Type.Literal("replace"), Type.Literal("append")], {
      default: "create",
      description: "create: 409 if it exists; replace: create or overwrite; append: add to an existing index",
    }),
    embeddings: Type.Optional(EmbeddingsField),
  },
  {
    ...strict,
    examples: [
      {
        index_name: "handbook",
        documents: [{ id: "intro", title: "Intro", text: "Lectern answers questions from your documents." }],
      },
    ],
  },
);
export type BuildRequest = Static<typeof BuildRequest>;

/** The text fields of a multipart build: the JSON body's fields, with the files uploaded instead. */
export const BuildForm = Type.Omit(BuildRequest, ["documents", "files"]);
export type BuildForm = Static<typeof BuildForm>;

/** The text fields of a multipart add-documents request. */
export const DocumentsForm = Type.Object(
  { tenant_id: Type.Optional(TenantId), embeddings: Type.Optional(EmbeddingsField) },
  strict,
);
export type DocumentsForm = Static<typeof DocumentsForm>;

/** What a write says of itself, first: the index, and the documents and chunks this request wrote. */
const writtenFields = {
  success: Type.Boolean(),
  index_name: Type.String(),
  tenant_id: Type.String(),
  documents_count: Type.Integer({ description: "documents written by this request" }),
  chunks_count: Type.Integer({ description: "chunks written by this request" }),
};

export const BuildResponse = Type.Object({
  ...writtenFields,
  vocabulary_size: Type.Integer(),
  build_ms: Type.Number(),
  message: Type.String(),
});

/**
 * The index a question is asked of: `index_name`, or `index` as /rag/chat and the OpenAI routes name
 * it (one of them; both given must agree). The same two fields on /rag/query and /rag/chat.
 */
const indexTargetFields = {
  index_name: Type.Optional(IndexName),
  index: Type.Optional({ ...IndexName, description: "alias of index_name" }),
  tenant_id: Type.Optional(TenantId),
};

export const QueryRequest = Type.Object(
  {
    query: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    question: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: "alias of query" })),
    ...indexTargetFields,
    ...searchAndAnswerFields,
    stream: Type.Optional(
      Type.Boolean({
        description: "server-sent events: results, then answer pieces, then the whole response",
      }),
    ),
    messages: Type.Optional({
      ...ChatTurns,
      description: "a conversation instead of query: searched as POST /rag/chat does",
    }),
  },
  { ...strict, examples: [{ query: "What does Lectern do?", index_name: "handbook", top_k: 3 }] },
);
export type QueryRequest = Static<typeof QueryRequest>;

export { QueryResultSchema };

/** /rag/query's response: `ask`'s, and with `messages`, what the conversation searched. */
export const QueryResponse = Type.Object({
  ...AskResponse.properties,
  search_query: Type.Optional(searchPlanFields.search_query),
  query_rewritten: Type.Optional(searchPlanFields.query_rewritten),
  standalone_question: Type.Optional(searchPlanFields.standalone_question),
  rewrite_skipped_reason: searchPlanFields.rewrite_skipped_reason,
  rewrite_tokens: searchPlanFields.rewrite_tokens,
});

export const IndexInfo = Type.Object({
  name: Type.String(),
  tenant_id: Type.String(),
  scorer: Type.String(),
  documents_count: Type.Integer(),
  chunks_count: Type.Integer(),
  vocabulary_size: Type.Integer(),
  chunk_size: Type.Integer(),
  overlap: Type.Integer(),
  created_at: Type.String(),
  updated_at: Type.String(),
  size_bytes: Type.Integer(),
  version: Type.Integer({
    description:
      "rises with every committed write to the index (build, append, document add, update or delete, " +
      "a background merge); never reused, kept across restarts: a changed version means a changed index",
  }),
  embeddings: Type.Union(
    [
      Type.Object({
        model: Type.String(),
        dimension: Type.Integer(),
        storage: Type.String({ description: "f32, f16 or i8" }),
      }),
      Type.Null(),
    ],
    { description: "the embedding model and dimension of the index's vectors; null: lexical only" },
  ),
});

/** GET /rag/stats/{index_name}: the index's info plus its segments and this replica's segment counters. */
export const IndexStatsResponse = Type.Object({
  ...IndexInfo.properties,
  segments: Type.Array(
    Type.Object({
      id: Type.Integer(),
      documents: Type.Integer({ description: "Chunks the segment holds, deleted ones included" }),
      deleted: Type.Integer({ description: "Of those, deleted (dropped at the segment's next merge)" }),
      bytes: Type.Integer(),
    }),
  ),
  segments_count: Type.Integer(),
  deleted_chunks: Type.Integer(),
  vectors: Type.Union(
    [
      Type.Object({
        count: Type.Integer({ description: "live chunks' vectors" }),
        dimension: Type.Integer(),
        model: Type.String(),
        storage: Type.String(),
        bytes: Type.Integer({ description: "bytes the loaded vectors take in this process" }),
      }),
      Type.Null(),
    ],
    { description: "null: the index holds no embeddings" },
  ),
  merges: Type.Object({
    completed: Type.Integer({ description: "Merges of this index committed by this process" }),
    running: Type.Integer(),
  }),
  loaded: Type.Object(
    {
      segments_loaded: Type.Integer(),
      bytes_loaded: Type.Integer(),
    },
    { description: "Segments (and their bytes) this process read from the store for this index" },
  ),
});

export const IndicesResponse = Type.Object({ indices: Type.Array(IndexInfo), count: Type.Integer() });

export const TenantQuery = Type.Object({ tenant_id: Type.Optional(TenantId) });
export const DeleteIndexQuery = Type.Object({
  tenant_id: Type.Optional(TenantId),
  force: Type.Optional(
    Type.Union([Type.Literal("true"), Type.Literal("false")], { description: "(compat) accepted" }),
  ),
});
export const IndexParams = Type.Object({ index_name: IndexName });
export const DocumentParams = Type.Object({
  index_name: IndexName,
  document_id: Type.String({ minLength: 1, maxLength: 512 }),
});

export const DocumentsRequest = Type.Object(
  {
    documents: Type.Array(DocumentInput, { minItems: 1, maxItems: 1_000_000 }),
    tenant_id: Type.Optional(TenantId),
    embeddings: Type.Optional(EmbeddingsField),
  },
  strict,
);
export type DocumentsRequest = Static<typeof DocumentsRequest>;

export const DocumentsResponse = Type.Object({
  ...writtenFields,
  index_documents_count: Type.Integer(),
  index_chunks_count: Type.Integer(),
  build_ms: Type.Number(),
});

export const DeletedResponse = Type.Object({ success: Type.Boolean(), message: Type.String() });

/** Folder sync (#14): POST /rag/indices/{index_name}/sync. */
export const SyncRequest = Type.Object(
  {
    folder: Type.String({
      minLength: 1,
      maxLength: 4096,
      description: 'a folder under RAG_FILES_DIR: relative to it ("." for all of it), or absolute inside it',
    }),
    tenant_id: Type.Optional(TenantId),
    scorer: Type.Optional(
      Type.Union([Type.Literal("tfidf"), Type.Literal("bm25")], {
        description: `when the sync creates the index; default "${DEFAULT_SCORER}"`,
      }),
    ),
    chunk_size: Type.Optional(
      Type.Integer({
        ...CHUNK_SIZE_RANGE,
        description: `when the sync creates the index; default ${DEFAULT_CHUNK_SIZE}`,
      }),
    ),
    overlap: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_OVERLAP,
        description: "when the sync creates the index: 0 … chunk_size/2; default min(128, chunk_size/2)",
      }),
    ),
  },
  { ...strict, examples: [{ folder: "handbook" }] },
);
export type SyncRequest = Static<typeof SyncRequest>;

export const SyncResponse = Type.Object({
  index_name: Type.String(),
  tenant_id: Type.String(),
  created: Type.Boolean({ description: "this sync created the index" }),
  added: Type.Integer({ description: "new files indexed" }),
  updated: Type.Integer({ description: "changed files (by sha256 of their bytes) re-indexed" }),
  deleted: Type.Integer({ description: "documents of files no longer in the folder, deleted" }),
  unchanged: Type.Integer(),
  failed: Type.Array(Type.Object({ file: Type.String(), message: Type.String() }), {
    description: "files that could not be read or parsed; left as they were in the index",
  }),
  documents_count: Type.Integer({ description: "the index's documents after the sync" }),
  chunks_count: Type.Integer({ description: "the index's chunks after the sync" }),
  version: Type.Integer({
    description: "the index's version after the sync; unchanged when nothing changed",
  }),
  elapsed_ms: Type.Number(),
});

/** Conversations (#27): POST /rag/chat, and `messages` on /rag/query. */
export const ChatRequest = Type.Object(
  {
    ...indexTargetFields,
    messages: ChatTurns,
    ...searchAndAnswerFields,
    stream: Type.Optional(
      Type.Boolean({
        description:
          "server-sent events: `results` (with search_query), answer pieces ({token}), then `done` with the whole response",
      }),
    ),
  },
  {
    additionalProperties: false,
    examples: [
      {
        index: "handbook",
        messages: [
          { role: "user", content: "How do I rotate the API keys?" },
          { role: "assistant", content: "Create a new key, deploy it, then revoke the old one [1]." },
          { role: "user", content: "How long does that take?" },
        ],
      },
    ],
  },
);
export type ChatRequest = Static<typeof ChatRequest>;

export const ChatResponse = ConverseResponse;
