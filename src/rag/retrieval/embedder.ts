/**
 * Where RAG's embeddings come from: the text generation service of the same process (`npm start`),
 * without an HTTP hop, or any OpenAI-compatible `POST /embeddings` at EMBEDDING_URL (ours, the
 * llama.cpp server, Ollama's /v1, vLLM, TEI), in batches of EMBEDDING_BATCH_SIZE texts, each with its
 * own timeout.
 *
 * An index records its embedding model and dimension; `embedFor` embeds for an index and refuses
 * (409, naming both) an embedder whose model or dimension differs from the index's, since vectors of
 * two models are not comparable. An embedder that cannot be reached or fails is a 503 ("embedder
 * unavailable"): the write or query that needed it does nothing.
 */
import type { Config } from "../../core/config.js";
import { conflict, corrupt, type DomainError } from "../../core/errors.js";
import { LocalRetriever } from "./local-retriever.js";
import type { EmbeddingModel, EmbeddingPort } from "./ports.js";
import { decodeAnswer } from "./embedding-decode.js";
import {
  malformedAnswer,
  postForBody,
  localModelFailure,
  upstreamTarget,
  type UpstreamOptions,
  type UpstreamTarget,
} from "./upstream.js";

export interface Embedder {
  /** The model's name, as an index records it (known once the first batch is answered, at the latest). */
  readonly model: string;
  /** Length of its vectors, once known (after the first batch). */
  readonly dimension?: number;
  /** One vector per text, in order. */
  embed(texts: readonly string[], signal?: AbortSignal): Promise<Float32Array[]>;
  /** How embeddings are computed, for the start-up log line. */
  readonly description: string;
  close(): Promise<void>;
}

/** What an index records of the embeddings it holds. */
export interface EmbeddingSpace {
  model: string;
  dimension: number;
}

/** 409 when `embedder` cannot serve an index whose vectors are `index`'s. */
export function checkSameSpace(index: EmbeddingSpace, embedder: { model: string; dimension?: number }): void {
  const modelDiffers = embedder.model !== "" && embedder.model !== index.model;
  const dimensionDiffers = embedder.dimension !== undefined && embedder.dimension !== index.dimension;
  if (!modelDiffers && !dimensionDiffers) return;
  const theirs = `${embedder.model || "(unnamed)"}${embedder.dimension === undefined ? "" : `, ${embedder.dimension} dimensions`}`;
  throw conflict(
    `The index holds embeddings of model ${index.model} (${index.dimension} dimensions), but the embedder is ${theirs}: ` +
      "vectors of different models cannot be compared. Use the index's model, or rebuild the index with this one.",
  );
}

/**
 * Embeds `texts` for an index: with `index` (its recorded space), the embedder must be that model and
 * its vectors that long (409 naming both otherwise); without (a new index), any model.
 */
export async function embedFor(
  embedder: Embedder,
  texts: readonly string[],
  index: EmbeddingSpace | null,
  signal?: AbortSignal,
): Promise<Float32Array[]> {
  if (index) checkSameSpace(index, embedder);
  const vectors = await embedder.embed(texts, signal);
  if (index) checkSameSpace(index, { model: embedder.model, dimension: vectors[0]?.length });
  return vectors;
}

/**
 * A batch's vectors checked (as many as texts, all of one length, finite values; `fail` says what is
 * wrong), and that length; 409 when it differs from the `known` length of earlier batches.
 */
function batchDimension(
  vectors: readonly Float32Array[],
  count: number,
  known: number | undefined,
  model: string,
  fail: (why: string) => DomainError,
): number {
  if (vectors.length !== count) throw fail(`${vectors.length} vectors for ${count} texts`);
  const dimension = vectors[0]?.length ?? known ?? 0;
  for (const vector of vectors) {
    if (vector.length === 0) throw fail("an empty vector");
    if (vector.length !== dimension)
      throw fail(`vectors of ${vector.length} and ${dimension} dimensions together`);
    for (const value of vector)
      if (!Number.isFinite(value)) throw fail("a value that is not a finite number");
  }
  if (known !== undefined && dimension !== known) throw otherDimension(model, dimension, known);
  return dimension;
}

/** 409: a model whose answers changed dimension between batches. */
function otherDimension(model: string, dimension: number, known: number): DomainError {
  return conflict(
    `The embedding model ${model || "(unnamed)"} answered ${dimension} dimensions, then ${known}`,
  );
}

/** Splits `texts` into batches and embeds them one after another (the caller's signal stops between). */
async function inBatches(
  texts: readonly string[],
  batchSize: number,
  embedBatch: (batch: readonly string[]) => Promise<Float32Array[]>,
  signal?: AbortSignal,
): Promise<Float32Array[]> {
  const vectors: Float32Array[] = [];
  for (let start = 0; start < texts.length; start += batchSize) {
    signal?.throwIfAborted();
    vectors.push(...(await embedBatch(texts.slice(start, start + batchSize))));
  }
  return vectors;
}

/** Requests go to `${baseUrl}/embeddings`. */
export interface HttpEmbedderOptions extends UpstreamOptions {
  batchSize: number;
}

/**
 * The longest vectors read from an embedding server, and the length assumed of a model whose answers
 * have not been seen yet, to bound its first answer (the largest models in use have 4,096; OpenAI's
 * text-embedding-3-large 3,072).
 */
export const MAX_EMBEDDING_DIMENSION = 8192;
/**
 * Bytes of JSON one float may take in an answer: 22 characters for a float32 written in full
 * (`-1.2345678901234567e-05`), a comma, and room for pretty-printed indentation.
 */
const BYTES_PER_VALUE = 48;
/** Bytes of one data item around its numbers, and of the answer around its data (model, usage). */
const BYTES_PER_ITEM = 1024;
const ENVELOPE_BYTES = 64 * 1024;

/** The embedder at EMBEDDING_URL. */
export class HttpEmbedder implements Embedder {
  private readonly target: UpstreamTarget;
  private answeredModel: string | undefined;
  private knownDimension: number | undefined;

  constructor(private readonly options: HttpEmbedderOptions) {
    if (!Number.isInteger(options.batchSize) || options.batchSize < 1)
      throw new RangeError(`embedding batch size must be an integer ≥ 1, got ${options.batchSize}`);
    this.target = upstreamTarget("embedder", options, "embeddings");
  }

  get model(): string {
    return this.options.model ?? this.answeredModel ?? "";
  }

  get dimension(): number | undefined {
    return this.knownDimension;
  }

  get description(): string {
    return `RAG: embeddings from ${this.target.url}${this.options.model ? ` (model ${this.options.model})` : ""}, ${this.options.batchSize} texts a request`;
  }

  embed(texts: readonly string[], signal?: AbortSignal): Promise<Float32Array[]> {
    return inBatches(texts, this.options.batchSize, (batch) => this.embedBatch(batch, signal), signal);
  }

  /**
   * One batch: its answer read up to what `batch.length` vectors of the known dimension (or of
   * MAX_EMBEDDING_DIMENSION before the first answer) can take, their lengths checked before any vector
   * is built (embedding-answer.ts), decoded off the event loop when large (embedding-decode.ts).
   */
  private async embedBatch(batch: readonly string[], signal?: AbortSignal): Promise<Float32Array[]> {
    const { url } = this.target;
    const dimension = this.knownDimension ?? MAX_EMBEDDING_DIMENSION;
    const perVector = dimension * BYTES_PER_VALUE + BYTES_PER_ITEM;
    const bytes = await postForBody(
      this.target,
      {
        input: batch,
        encoding_format: "float",
        ...(this.options.model ? { model: this.options.model } : {}),
      },
      {
        maxBytes: ENVELOPE_BYTES + batch.length * perVector,
        allows: `${batch.length} vectors of ${dimension} dimensions (EMBEDDING_BATCH_SIZE)`,
      },
      signal,
    );
    const fail = (why: string) => malformedAnswer("embedder", url, why);
    const decoded = await decodeAnswer(bytes, batch.length, this.knownDimension, MAX_EMBEDDING_DIMENSION);
    if ("notJson" in decoded) throw fail(`not JSON: ${decoded.notJson}`);
    if ("malformed" in decoded) throw fail(decoded.malformed);
    if ("otherDimension" in decoded) throw otherDimension(this.model, decoded.otherDimension, dimension);
    if (this.options.model === null && decoded.model !== null) this.answeredModel = decoded.model;
    this.knownDimension = decoded.dimension;
    const { rows } = decoded;
    return Array.from({ length: batch.length }, (_, i) =>
      rows.subarray(i * decoded.dimension, (i + 1) * decoded.dimension),
    );
  }

  async close(): Promise<void> {
    await this.target.agent.close();
  }
}

/**
 * The embedding model of the text generation app in this process, through its port (EMBEDDING_MODEL_PATH's
 * model, a MODELS_DIR model by name, or the generation model), admitted by that model's scheduler like
 * every other request.
 */
export class LocalEmbedder extends LocalRetriever<EmbeddingModel> implements Embedder {
  private knownDimension: number | undefined;

  constructor(
    port: EmbeddingPort,
    requested: string | null,
    private readonly batchSize: number,
  ) {
    super(port, requested);
  }

  get dimension(): number | undefined {
    return this.knownDimension;
  }

  /** Says which model of this process embeds (EMBEDDING_MODEL_PATH's, or the generation model). */
  get description(): string {
    const name = this.servedName();
    if (name === undefined)
      return `RAG: no embedder: the model ${this.requested ?? ""} of this process cannot embed, and EMBEDDING_URL is not set`;
    return `RAG: embeddings from the model ${name} of this process, no HTTP hop; set EMBEDDING_URL to use another server`;
  }

  embed(texts: readonly string[], signal?: AbortSignal): Promise<Float32Array[]> {
    return inBatches(texts, this.batchSize, (batch) => this.embedBatch(batch, signal), signal);
  }

  private async embedBatch(batch: readonly string[], signal?: AbortSignal): Promise<Float32Array[]> {
    // A model that is unknown (404) or cannot embed (400) is the request's or the setup's to fix.
    const served = this.port.resolve(this.requested);
    let vectors: Float32Array[];
    try {
      ({ vectors } = await served.embed(batch, signal));
    } catch (error) {
      throw localModelFailure("embedder", error, signal);
    }
    this.resolvedName ??= served.name;
    this.knownDimension = batchDimension(vectors, batch.length, this.knownDimension, served.name, (why) =>
      corrupt(`The embedding model ${served.name} answered ${why}`),
    );
    return vectors;
  }
}

/**
 * The embedder RAG uses: EMBEDDING_URL when set, else the text generation service of this process when
 * there is one, else none (builds store no vectors; a request that asks for them is a 503).
 */
export function embedderFor(
  config: Config["rag"],
  local: EmbeddingPort | undefined,
  model = config.embeddingModel,
): Embedder | null {
  if (config.embeddingUrl)
    return new HttpEmbedder({
      baseUrl: config.embeddingUrl,
      model,
      apiKey: config.embeddingApiKey,
      batchSize: config.embeddingBatchSize,
      timeoutMs: config.embeddingTimeoutMs,
    });
  if (local) return new LocalEmbedder(local, model, config.embeddingBatchSize);
  return null;
}
