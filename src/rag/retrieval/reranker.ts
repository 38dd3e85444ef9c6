/**
 * Where RAG's rerank scores come from: the reranker of the text generation app in this process
 * (through its port, RerankPort: no HTTP hop), or RERANK_URL in the shape the llama.cpp
 * server, Jina and Cohere share: `POST {base}/rerank {model, query, documents, top_n}` →
 * `{results: [{index, relevance_score}]}`. Either way the answer is one score per candidate, in the
 * candidates' order (higher is more relevant); failures map as the embedder's do (upstream.ts).
 */
import type { Config } from "../../core/config.js";
import { LocalRetriever } from "./local-retriever.js";
import type { RerankModel, RerankPort } from "./ports.js";
import {
  malformedAnswer,
  postJson,
  localModelFailure,
  upstreamTarget,
  type UpstreamOptions,
  type UpstreamTarget,
} from "./upstream.js";

export interface Reranker {
  /** The model's name ("" until known, for a server asked without one). */
  readonly model: string;
  /** One score per document, in the documents' order. */
  rerank(query: string, documents: readonly string[], signal?: AbortSignal): Promise<number[]>;
  /** How reranking is done, for the start-up log line. */
  readonly description: string;
  close(): Promise<void>;
}

/**
 * Characters of a candidate the reranker reads: cross-encoders take 512 tokens (query included), about
 * 2000 characters of English; the rest would be cut by the model or refused by the server. Cut at a
 * word boundary, after the title, since a chunk's start is where its topic is announced.
 */
export const RERANK_MAX_CHARS = 2000;

export function rerankText(title: string | null, text: string): string {
  const whole = title ? `${title}\n${text}` : text;
  if (whole.length <= RERANK_MAX_CHARS) return whole;
  const cut = whole.slice(0, RERANK_MAX_CHARS);
  const space = cut.lastIndexOf(" ");
  return space > RERANK_MAX_CHARS / 2 ? cut.slice(0, space) : cut;
}

/**
 * Bytes one result of a rerank answer may take: its index and score, and the candidate's text where
 * the server echoes it (Jina does by default): RERANK_MAX_CHARS characters, JSON-escaped, with room.
 */
const RERANK_BYTES_PER_RESULT = 16 * 1024;
/** Bytes of a rerank answer around its results (model, usage, meta). */
const RERANK_ENVELOPE_BYTES = 64 * 1024;

/** Requests go to `${baseUrl}/rerank`. */
export type HttpRerankerOptions = UpstreamOptions;

interface RerankAnswer {
  model?: unknown;
  results?: Array<{ index?: unknown; relevance_score?: unknown }>;
}

/** The reranker at RERANK_URL. */
export class HttpReranker implements Reranker {
  private readonly target: UpstreamTarget;
  private answeredModel: string | undefined;

  constructor(private readonly options: HttpRerankerOptions) {
    this.target = upstreamTarget("reranker", options, "rerank");
  }

  get model(): string {
    return this.options.model ?? this.answeredModel ?? "";
  }

  get description(): string {
    return `RAG: reranking by ${this.target.url}${this.options.model ? ` (model ${this.options.model})` : ""}`;
  }

  async rerank(query: string, documents: readonly string[], signal?: AbortSignal): Promise<number[]> {
    if (documents.length === 0) return [];
    const { url } = this.target;
    const answer = (await postJson(
      this.target,
      {
        query,
        documents,
        // Every candidate's score is wanted, not only the best ones'.
        top_n: documents.length,
        ...(this.options.model ? { model: this.options.model } : {}),
      },
      {
        maxBytes: RERANK_ENVELOPE_BYTES + documents.length * RERANK_BYTES_PER_RESULT,
        allows: `scores of ${documents.length} candidates`,
      },
      signal,
    )) as RerankAnswer;
    const fail = (why: string) => malformedAnswer("reranker", url, why);
    if (answer === null || typeof answer !== "object" || !Array.isArray(answer.results))
      throw fail("no results list");
    // Servers answer best first (and may drop some): place each score at its document's index.
    const scores = new Array<number | undefined>(documents.length);
    for (const result of answer.results) {
      const index = result?.index;
      const score = result?.relevance_score;
      if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= documents.length)
        throw fail(`index ${String(index)} is not one of the ${documents.length} documents`);
      if (typeof score !== "number" || !Number.isFinite(score))
        throw fail(`relevance_score of document ${index} is not a finite number`);
      if (scores[index] !== undefined) throw fail(`two scores for document ${index}`);
      scores[index] = score;
    }
    const missing = scores.findIndex((score) => score === undefined);
    if (missing >= 0) throw fail(`no score for document ${missing} of ${documents.length}`);
    if (this.options.model === null && typeof answer.model === "string" && answer.model !== "")
      this.answeredModel = answer.model;
    return scores as number[];
  }

  async close(): Promise<void> {
    await this.target.agent.close();
  }
}

/** The reranker of the text generation app in this process, through its port. */
export class LocalReranker extends LocalRetriever<RerankModel> implements Reranker {
  /** Says which model reranks, or that none of this process's models can (then a rerank is a 400). */
  get description(): string {
    const name = this.servedName();
    if (name === undefined)
      return `RAG: no reranker: ${this.requested ? `the model ${this.requested} is not` : "no model of this process is"} a reranker (a GGUF with a rank head in MODELS_DIR), and RERANK_URL is not set`;
    return `RAG: reranking by the model ${name} of this process, no HTTP hop; set RERANK_URL to use another server`;
  }

  async rerank(query: string, documents: readonly string[], signal?: AbortSignal): Promise<number[]> {
    if (documents.length === 0) return [];
    // A model that is unknown (404) or no reranker (400) is the request's or the setup's to fix.
    const served = this.port.resolve(this.requested);
    try {
      const { scores } = await served.rerank(query, documents, signal);
      this.resolvedName ??= served.name;
      return scores;
    } catch (error) {
      throw localModelFailure("reranker", error, signal);
    }
  }
}

/** RERANK_URL when set, else this process's text generation service when there is one, else none. */
export function rerankerFor(
  config: Config["rag"],
  local: RerankPort | undefined,
  model = config.rerankModel,
): Reranker | null {
  if (config.rerankUrl)
    return new HttpReranker({
      baseUrl: config.rerankUrl,
      model,
      apiKey: config.rerankApiKey,
      timeoutMs: config.rerankTimeoutMs,
    });
  if (local) return new LocalReranker(local, model);
  return null;
}
