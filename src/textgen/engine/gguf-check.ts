/**
 * What a model file is, read before llama.cpp sees it: a bad file fails in milliseconds with a reason
 * instead of reaching llama.cpp, which on a 16-byte "GGUF" file logged "Unsupported GGUF version" and
 * sat at "loading" for minutes at 2.4 GB RSS. The checks are llama.cpp's own (gguf.cpp): magic,
 * version 2 or 3, counts that fit the file, and every tensor's data within the file bounds. The same
 * read gives the model's roles (generation, embeddings, reranking) and a memory estimate.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import * as nodeLlamaCpp from "node-llama-cpp";
import { readGgufFileInfo, type GgufFileInfo } from "node-llama-cpp";

export type ModelRole = "generate" | "embed" | "rerank";

export interface GgufSummary {
  architecture: string;
  /** Bytes on disk. */
  fileBytes: number;
  /** What the model can serve: a rank head makes a reranker, a pooling type an embedding model. */
  roles: ModelRole[];
  layers: number;
  /** K plus V values per token and layer (kv heads × head size × 2). */
  kvValuesPerToken: number;
  trainContextSize: number;
}

export class ModelFileError extends Error {}

/** The fixed part of a GGUF header: magic, version, tensor count, key/value count. */
const HEADER_BYTES = 24;
/** Smallest possible tensor description and key/value pair, to bound counts by the file size. */
const MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 8 + 4 + 8;
const MIN_KV_BYTES = 8 + 1 + 4 + 1;
/** llama.cpp's pooling types (llama.h); RANK needs a classification head. */
const POOLING_NONE = 0;
const POOLING_RANK = 4;
/** Encoder-only architectures llama.cpp runs for embeddings only. */
const EMBEDDING_ARCHITECTURES = new Set(["bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "neo-bert"]);

// A const enum in its types, an object at run time.
const KNOWN_ARCHITECTURES = new Set<string>(
  Object.values(
    (nodeLlamaCpp as unknown as { GgufArchitectureType: Record<string, string> }).GgufArchitectureType,
  ),
);

/** Bytes per block and elements per block of ggml's tensor types (ggml.c's type traits). */
const GGML_TYPE_SIZES: Record<number, [bytes: number, elements: number]> = {
  0: [4, 1], // F32
  1: [2, 1], // F16
  2: [18, 32], // Q4_0
  3: [20, 32], // Q4_1
  6: [22, 32], // Q5_0
  7: [24, 32], // Q5_1
  8: [34, 32], // Q8_0
  9: [36, 32], // Q8_1
  10: [84, 256], // Q2_K
  11: [110, 256], // Q3_K
  12: [144, 256], // Q4_K
  13: [176, 256], // Q5_K
  14: [210, 256], // Q6_K
  15: [292, 256], // Q8_K
  24: [1, 1], // I8
  25: [2, 1], // I16
  26: [4, 1], // I32
  27: [8, 1], // I64
  28: [8, 1], // F64
  30: [2, 1], // BF16
};

/** Reads and checks `file`; throws ModelFileError saying what is wrong with it. */
export async function inspectGguf(file: string): Promise<GgufSummary> {
  const fileBytes = statSync(file).size;
  checkHeader(file, fileBytes);
  let info: GgufFileInfo;
  try {
    info = await readGgufFileInfo(file, { readTensorInfo: true, logWarnings: false });
  } catch (error) {
    throw new ModelFileError(`the GGUF header cannot be read: ${(error as Error).message}`);
  }
  checkTensorBounds(info, fileBytes);
  // node-llama-cpp's list of the architectures its llama.cpp release knows: llama.cpp itself only
  // says "Failed to load model" to the caller, its reason goes to stderr.
  const architecture = String(info.metadata.general?.architecture ?? "");
  if (!KNOWN_ARCHITECTURES.has(architecture))
    throw new ModelFileError(`unknown model architecture: '${architecture}'`);
  return summarize(info, fileBytes);
}

function checkHeader(file: string, fileBytes: number): void {
  const header = Buffer.alloc(HEADER_BYTES);
  const fd = openSync(file, "r");
  let read: number;
  try {
    read = readSync(fd, header, 0, HEADER_BYTES, 0);
  } finally {
    closeSync(fd);
  }
  if (read < 4 || header.toString("latin1", 0, 4) !== "GGUF")
    throw new ModelFileError(`not a GGUF file (it does not start with "GGUF")`);
  if (read < 8) throw new ModelFileError(`the GGUF header is truncated: the file has ${fileBytes} bytes`);
  const version = header.readUInt32LE(4);
  if (version === 1)
    throw new ModelFileError("GGUFv1 is no longer supported, please use a more up-to-date version");
  if (version !== 2 && version !== 3)
    throw new ModelFileError(`unsupported GGUF version ${version} (llama.cpp reads versions 2 and 3)`);
  if (read < HEADER_BYTES)
    throw new ModelFileError(`the GGUF header is truncated: the file has ${fileBytes} bytes`);
  const tensors = header.readBigUInt64LE(8);
  const pairs = header.readBigUInt64LE(16);
  if (tensors * BigInt(MIN_TENSOR_INFO_BYTES) + pairs * BigInt(MIN_KV_BYTES) > BigInt(fileBytes))
    throw new ModelFileError(
      `the GGUF header claims ${tensors} tensors and ${pairs} metadata entries, more than the ${fileBytes}-byte file can hold (truncated or corrupted)`,
    );
}

function checkTensorBounds(info: GgufFileInfo, fileBytes: number): void {
  const alignment = Number((info.metadata.general as { alignment?: number } | undefined)?.alignment ?? 32);
  const dataStart = Math.ceil((info.metadataSize + (info.tensorInfoSize ?? 0)) / alignment) * alignment;
  for (const tensor of info.tensorInfo ?? []) {
    const elements = tensor.dimensions.reduce<number>((product, d) => product * Number(d), 1);
    const size = GGML_TYPE_SIZES[tensor.ggmlType];
    const bytes = size ? Math.ceil(elements / size[1]) * size[0] : 0;
    if (dataStart + Number(tensor.offset) + bytes > fileBytes)
      throw new ModelFileError(
        `tensor '${tensor.name}' data is not within the file bounds, model is corrupted or incomplete`,
      );
  }
}

function summarize(info: GgufFileInfo, fileBytes: number): GgufSummary {
  const architecture = String(info.metadata.general?.architecture ?? "unknown");
  const fields = ((info.metadata as Record<string, unknown>)[architecture] ?? {}) as {
    block_count?: number;
    embedding_length?: number;
    context_length?: number;
    pooling_type?: number;
    attention?: { head_count?: number; head_count_kv?: number; key_length?: number; value_length?: number };
  };
  const heads = Number(fields.attention?.head_count ?? 1) || 1;
  const kvHeads = Number(fields.attention?.head_count_kv ?? heads) || heads;
  const headSize = Number(fields.embedding_length ?? 0) / heads;
  const keyLength = Number(fields.attention?.key_length ?? headSize);
  const valueLength = Number(fields.attention?.value_length ?? headSize);
  const hasRankHead = (info.tensorInfo ?? []).some(
    (tensor) => tensor.name === "cls.weight" || tensor.name === "cls.output.weight",
  );
  const pooling = fields.pooling_type === undefined ? undefined : Number(fields.pooling_type);
  let roles: ModelRole[];
  if (pooling === POOLING_RANK && hasRankHead) roles = ["rerank"];
  else if ((pooling !== undefined && pooling !== POOLING_NONE) || EMBEDDING_ARCHITECTURES.has(architecture))
    roles = ["embed"];
  else roles = ["generate", "embed"];
  return {
    architecture,
    fileBytes,
    roles,
    layers: Number(fields.block_count ?? 0),
    kvValuesPerToken: kvHeads * (keyLength + valueLength),
    trainContextSize: Number(fields.context_length ?? 0),
  };
}

/** Bytes one KV cache value takes per type: f16, and llama.cpp's 32-value blocks of q8_0 and q4_0. */
export const KV_BYTES_PER_VALUE = { f16: 2, q8_0: 34 / 32, q4_0: 18 / 32 } as const;

/**
 * Memory a loaded model takes, estimated: its weights plus a KV cache of `contextTokens` (every
 * sequence's cells together; F16 by default).
 */
export function estimateModelBytes(
  summary: GgufSummary,
  contextTokens: number,
  kvCacheType: keyof typeof KV_BYTES_PER_VALUE = "f16",
): number {
  return Math.round(
    summary.fileBytes +
      summary.layers * contextTokens * summary.kvValuesPerToken * KV_BYTES_PER_VALUE[kvCacheType],
  );
}
