/** What the RAG route plugins are given (one module, so the plugins need not import each other). */
import type { AnsweringDeps } from "../answering/ask.js";
import type { WalkLimits } from "../ingest/files.js";
import type { AnswerWriter } from "../answering/generative.js";
import type { Ingest } from "../ingest/limits.js";
import type { RagMetrics } from "../metrics.js";
import type { Retrievers } from "../retrieval/retrievers.js";
import type { RagService } from "../service.js";

export interface RagRouteDeps extends AnsweringDeps {
  service: RagService;
  metrics: RagMetrics;
  /** Writes generative answers: GENERATION_URL's model, or the one in this process; null without. */
  answerWriter: AnswerWriter | null;
  /** The embedder and reranker (EMBEDDING_URL / RERANK_URL, or the models of this process). */
  retrievers: Retrievers;
  ragFilesDir: string | null;
  /** Bounds of a walk of RAG_FILES_DIR and the hard-link policy (RAG_FILES_MAX_ENTRIES, …). */
  walk: WalkLimits;
  /** Body limit of the build and document routes. */
  largeBodyLimit: number;
  /** Nesting a JSON body may have (MAX_JSON_DEPTH). */
  maxJsonDepth: number;
  /** Documents and characters one build or append may carry (MAX_BUILD_DOCUMENTS, MAX_BUILD_CHARS). */
  maxBuildDocuments: number;
  maxBuildChars: number;
  /** Limits on extracting text from files, and the gate bounding how many requests parse at once. */
  ingest: Ingest;
}

export interface OpenAiRagOptions extends RagRouteDeps {
  /** Where uploaded files (POST /v1/files) wait, parsed, until a vector store takes them. */
  filesDir: string;
}
