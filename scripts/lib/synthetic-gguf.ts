/**
 * Writes a llama-architecture GGUF with random F32 weights and the tokenizer of a small real model.
 * It generates nonsense, but at the speed of a model of that size: a stand-in for a real model when
 * the question is how decode speed scales (batching across sequences, per-token overhead), and no
 * larger model can be downloaded. With `chain`, the weights are crafted instead so that the model
 * writes one given text after any prompt (see `SyntheticOptions.chain`). `syntheticLora` writes a LoRA
 * adapter for such a model, and `SyntheticOptions.mergeLora` the same model with that adapter applied
 * to its weights by hand (what the adapter must do at run time). No dependencies: GGUF v3 is a header,
 * key/value metadata, tensor descriptions and aligned tensor data.
 */
import { closeSync, existsSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { getLlama, LlamaLogLevel, readGgufFileInfo } from "node-llama-cpp";

export interface SyntheticShape {
  embedding: number;
  feedForward: number;
  layers: number;
  heads: number;
  kvHeads: number;
}

/** About 26 M parameters (105 MB of F32): decode is bound by reading weights, as real models are. */
export const DEFAULT_SHAPE: SyntheticShape = {
  embedding: 512,
  feedForward: 1408,
  layers: 8,
  heads: 8,
  kvHeads: 8,
};

const ALIGNMENT = 32;
/** llama.cpp's LLAMA_POOLING_TYPE_RANK, and the classification head's tensor name. */
const RANK_POOLING = 4;
const RANK_HEAD = "cls.output.weight";
/** llama.cpp's token types (tokenizer.ggml.token_type). */
const NORMAL_TOKEN = 1;
const BYTE_TOKEN = 6;
enum ValueType {
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  STRING = 8,
  ARRAY = 9,
}

class Writer {
  private readonly chunks: Buffer[] = [];
  length = 0;
  private push(buffer: Buffer): void {
    this.chunks.push(buffer);
    this.length += buffer.length;
  }
  u32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(value);
    this.push(b);
  }
  i32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(value);
    this.push(b);
  }
  u64(value: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(value));
    this.push(b);
  }
  f32(value: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(value);
    this.push(b);
  }
  string(value: string): void {
    const bytes = Buffer.from(value, "utf8");
    this.u64(bytes.length);
    this.push(bytes);
  }
  pad(): void {
    const extra = (ALIGNMENT - (this.length % ALIGNMENT)) % ALIGNMENT;
    if (extra > 0) this.push(Buffer.alloc(extra));
  }
  buffer(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

type MetaValue =
  | { type: ValueType.UINT32; value: number }
  | { type: ValueType.INT32; value: number }
  | { type: ValueType.FLOAT32; value: number }
  | { type: ValueType.STRING; value: string }
  | { type: ValueType.ARRAY; items: ValueType; value: ArrayLike<number> | string[] };

function writeValue(w: Writer, meta: MetaValue): void {
  w.u32(meta.type);
  if (meta.type === ValueType.STRING) w.string(meta.value);
  else if (meta.type === ValueType.UINT32) w.u32(meta.value);
  else if (meta.type === ValueType.INT32) w.i32(meta.value);
  else if (meta.type === ValueType.FLOAT32) w.f32(meta.value);
  else if (meta.type === ValueType.ARRAY) {
    w.u32(meta.items);
    w.u64(meta.value.length);
    for (const item of Array.from(meta.value as ArrayLike<number | string>)) {
      if (meta.items === ValueType.STRING) w.string(String(item));
      else if (meta.items === ValueType.FLOAT32) w.f32(Number(item));
      else w.i32(Number(item));
    }
  }
}

export interface SyntheticOptions {
  /** Where the file goes (by default a folder under the temp folder). */
  dir?: string;
  /**
   * Byte-fallback tokens (`<0xE2>`…) become plain text tokens. Random weights pick them at random,
   * and a lone byte of a multi-byte character is invalid UTF-8, which llama-server refuses to return
   * (500, "does not match the expected Content-only format"); as text, "<0xE2>" is valid.
   */
  plainByteTokens?: boolean;
  /** A Jinja chat template stored as `tokenizer.chat_template` (e.g. a Qwen3-style one that reasons). */
  chatTemplate?: string;
  /**
   * Further metadata (e.g. `llama.pooling_type` for an embedding model); a key given here replaces
   * the default of the same name. Part of the file name, so each variant is its own file.
   */
  metadata?: Record<string, string | number>;
  /** A short tag added to the file name (e.g. "qwen3-chat"). */
  tag?: string;
  /**
   * A reranker: qwen3 architecture (llama's plus per-head q/k norms), RANK pooling and a two-row
   * classification head `cls.output.weight` (rows "yes", "no"), the layout llama.cpp reads for
   * Qwen3-Reranker; the score is softmax(head · hidden)[0]. `swapped` writes the same weights with
   * the head's two rows exchanged, so its scores are 1 minus the unswapped model's.
   */
  rankHead?: { swapped?: boolean };
  /**
   * Crafted weights, not random: after any prompt the model writes exactly this text, then its
   * end-of-sequence token, at any temperature. A "bigram chain": every layer's matrices are zero,
   * so the residual stream at a position is just its token's embedding; the text's tokens get
   * orthogonal one-hot embeddings (every other token shares one more), and the output matrix maps
   * each one-hot to its successor's logit (~40 against 0 for every other token). So the next token
   * depends on the last one only: any token outside the chain starts it, each chain token is followed
   * by the next, the last by end-of-sequence. The text's tokens must all differ (an error says which
   * repeats), there must be fewer of them than `embedding`, and a prompt must not end in one of them.
   */
  chain?: string;
  /**
   * The chain's logit weight (default CHAIN_LOGIT_WEIGHT, about 40 for a 64-wide model): a small one
   * makes a "soft" chain, whose next chain token is only the most probable one (sampling tests).
   */
  chainWeight?: number;
  /** The weights with `adapter` applied at `scale` by hand: W + scale·alpha/rank·(B·A). */
  mergeLora?: { adapter: SyntheticLoraSpec; scale: number };
}

/** A LoRA adapter of random factors (seeded) for some of the model's matrices. */
export interface SyntheticLoraSpec {
  rank: number;
  alpha: number;
  seed: number;
  /** Base tensors it adapts (default: the output matrix). */
  tensors?: string[];
}

/** The logit of the next chain token is this times sqrt(embedding) (the RMS norm's scale), others 0. */
const CHAIN_LOGIT_WEIGHT = 5;

/** File name of the F32 model of `shape` (its parameters spelled out). */
export function syntheticModelName(shape: SyntheticShape, options: SyntheticOptions = {}): string {
  let suffix = options.plainByteTokens ? "-textbytes" : "";
  if (options.tag) suffix += `-${options.tag}`;
  if (options.rankHead) suffix += options.rankHead.swapped ? "-rank-swapped" : "-rank";
  if (options.chain !== undefined) suffix += "-chain";
  if (options.mergeLora) suffix += "-merged";
  if (
    options.chatTemplate !== undefined ||
    options.metadata !== undefined ||
    options.chain !== undefined ||
    options.mergeLora !== undefined
  ) {
    const variant: unknown[] = [options.chatTemplate ?? null, options.metadata ?? null];
    if (options.chain !== undefined) variant.push(options.chain, options.chainWeight ?? null);
    if (options.mergeLora) variant.push(options.mergeLora);
    suffix += `-${variantHash(JSON.stringify(variant))}`;
  }
  return `synthetic-llama-e${shape.embedding}-f${shape.feedForward}-l${shape.layers}-h${shape.heads}-kv${shape.kvHeads}${suffix}.gguf`;
}

/** FNV-1a of the variant's options, so two variants never share a file name. */
function variantHash(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(16).padStart(8, "0");
}

/** The file for `shape`, written once (tokenizer taken from `tokenizerModel`). */
export async function syntheticModel(
  tokenizerModel: string,
  shape: SyntheticShape = DEFAULT_SHAPE,
  options: SyntheticOptions = {},
): Promise<string> {
  const dir = options.dir ?? path.join(os.tmpdir(), "lectern-bench-models");
  const name = syntheticModelName(shape, options);
  const file = path.join(dir, name);
  if (existsSync(file)) return file;
  mkdirSync(dir, { recursive: true });

  const source = await readGgufFileInfo(tokenizerModel);
  const tokenizer = source.metadata.tokenizer?.ggml as unknown as {
    tokens: string[];
    scores: number[];
    token_type: number[];
    bos_token_id: number;
    eos_token_id: number;
    unknown_token_id: number;
  };
  const vocab = tokenizer.tokens.length;
  const chain =
    options.chain === undefined
      ? undefined
      : craftChain(
          await chainTokens(tokenizerModel, options.chain),
          tokenizer,
          shape.embedding,
          options.chainWeight ?? CHAIN_LOGIT_WEIGHT,
        );
  const { embedding: e, feedForward: ff, layers, heads, kvHeads } = shape;
  const headDim = e / heads;
  const kvDim = kvHeads * headDim;

  const arch = options.rankHead ? "qwen3" : "llama";
  const metadata: Array<[string, MetaValue]> = [
    ["general.architecture", { type: ValueType.STRING, value: arch }],
    ["general.name", { type: ValueType.STRING, value: name.replace(/\.gguf$/, "") }],
    [`${arch}.context_length`, { type: ValueType.UINT32, value: 2048 }],
    [`${arch}.embedding_length`, { type: ValueType.UINT32, value: e }],
    [`${arch}.feed_forward_length`, { type: ValueType.UINT32, value: ff }],
    [`${arch}.block_count`, { type: ValueType.UINT32, value: layers }],
    [`${arch}.attention.head_count`, { type: ValueType.UINT32, value: heads }],
    [`${arch}.attention.head_count_kv`, { type: ValueType.UINT32, value: kvHeads }],
    [`${arch}.attention.layer_norm_rms_epsilon`, { type: ValueType.FLOAT32, value: 1e-5 }],
    [`${arch}.rope.dimension_count`, { type: ValueType.UINT32, value: headDim }],
    ["tokenizer.ggml.model", { type: ValueType.STRING, value: "llama" }],
    ["tokenizer.ggml.tokens", { type: ValueType.ARRAY, items: ValueType.STRING, value: tokenizer.tokens }],
    ["tokenizer.ggml.scores", { type: ValueType.ARRAY, items: ValueType.FLOAT32, value: tokenizer.scores }],
    [
      "tokenizer.ggml.token_type",
      {
        type: ValueType.ARRAY,
        items: ValueType.INT32,
        value: options.plainByteTokens
          ? tokenizer.token_type.map((type) => (type === BYTE_TOKEN ? NORMAL_TOKEN : type))
          : tokenizer.token_type,
      },
    ],
    ["tokenizer.ggml.bos_token_id", { type: ValueType.UINT32, value: tokenizer.bos_token_id }],
    ["tokenizer.ggml.eos_token_id", { type: ValueType.UINT32, value: tokenizer.eos_token_id }],
    ["tokenizer.ggml.unknown_token_id", { type: ValueType.UINT32, value: tokenizer.unknown_token_id }],
  ];
  if (options.rankHead) {
    metadata.push(
      [`${arch}.pooling_type`, { type: ValueType.UINT32, value: RANK_POOLING }],
      [
        `${arch}.classifier.output_labels`,
        { type: ValueType.ARRAY, items: ValueType.STRING, value: ["yes", "no"] },
      ],
    );
  }
  if (options.chatTemplate !== undefined) {
    metadata.push(["tokenizer.chat_template", { type: ValueType.STRING, value: options.chatTemplate }]);
  }
  for (const [key, value] of Object.entries(options.metadata ?? {})) {
    const entry: MetaValue =
      typeof value === "string"
        ? { type: ValueType.STRING, value }
        : Number.isInteger(value) && value >= 0
          ? { type: ValueType.UINT32, value }
          : { type: ValueType.FLOAT32, value };
    const existing = metadata.findIndex(([name]) => name === key);
    if (existing >= 0) metadata[existing] = [key, entry];
    else metadata.push([key, entry]);
  }
  // [name, dims (ggml order: fastest first), norm (all ones) or random]
  const tensors: Array<[string, number[], boolean]> = [
    ["token_embd.weight", [e, vocab], false],
    ["output_norm.weight", [e], true],
    ["output.weight", [e, vocab], false],
  ];
  for (let i = 0; i < layers; i++) {
    tensors.push(
      [`blk.${i}.attn_norm.weight`, [e], true],
      [`blk.${i}.attn_q.weight`, [e, e], false],
      [`blk.${i}.attn_k.weight`, [e, kvDim], false],
      [`blk.${i}.attn_v.weight`, [e, kvDim], false],
      [`blk.${i}.attn_output.weight`, [e, e], false],
      ...(options.rankHead
        ? ([
            [`blk.${i}.attn_q_norm.weight`, [headDim], true],
            [`blk.${i}.attn_k_norm.weight`, [headDim], true],
          ] as Array<[string, number[], boolean]>)
        : []),
      [`blk.${i}.ffn_norm.weight`, [e], true],
      [`blk.${i}.ffn_gate.weight`, [e, ff], false],
      [`blk.${i}.ffn_up.weight`, [e, ff], false],
      [`blk.${i}.ffn_down.weight`, [ff, e], false],
    );
  }

  if (options.rankHead) tensors.push([RANK_HEAD, [e, 2], false]);

  const header = new Writer();
  header.u32(0x46554747); // "GGUF"
  header.u32(3);
  header.u64(tensors.length);
  header.u64(metadata.length);
  for (const [key, value] of metadata) {
    header.string(key);
    writeValue(header, value);
  }
  let offset = 0;
  const sizes: number[] = [];
  for (const [tensorName, dims] of tensors) {
    header.string(tensorName);
    header.u32(dims.length);
    for (const d of dims) header.u64(d);
    header.u32(0); // GGML_TYPE_F32
    header.u64(offset);
    const bytes = dims.reduce((a, b) => a * b, 1) * 4;
    sizes.push(bytes);
    offset += Math.ceil(bytes / ALIGNMENT) * ALIGNMENT;
  }
  header.pad();

  const partial = `${file}.${process.pid}.partial`;
  const fd = openSync(partial, "w");
  writeSync(fd, header.buffer());
  let seed = 0x9e3779b9;
  const random = () => {
    // xorshift32: fast, and the same file every time.
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 4294967296;
  };
  const merged = options.mergeLora;
  tensors.forEach(([tensorName, dims, norm], index) => {
    const count = sizes[index]! / 4;
    const delta =
      merged && (merged.adapter.tensors ?? ["output.weight"]).includes(tensorName)
        ? loraDelta(merged.adapter, dims[0]!, dims[1]!, merged.scale)
        : undefined;
    if (chain) {
      // Crafted: norms one, the embedding and output matrices the chain's, every other matrix zero.
      const crafted =
        tensorName === "token_embd.weight"
          ? chain.embedding
          : tensorName === "output.weight"
            ? chain.output
            : null;
      const values = crafted ?? new Float32Array(count).fill(norm ? 1 : 0);
      if (delta) for (let i = 0; i < count; i++) values[i]! += delta(i);
      writeSync(fd, new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
      const padding = (ALIGNMENT - (sizes[index]! % ALIGNMENT)) % ALIGNMENT;
      if (padding > 0) writeSync(fd, Buffer.alloc(padding));
      return;
    }
    const fanIn = dims[0]!;
    const scale = 1 / Math.sqrt(fanIn);
    const block = new Float32Array(Math.min(count, 1 << 20));
    for (let done = 0; done < count; done += block.length) {
      const n = Math.min(block.length, count - done);
      for (let i = 0; i < n; i++) block[i] = norm ? 1 : (random() * 2 - 1) * scale;
      if (delta) for (let i = 0; i < n; i++) block[i]! += delta(done + i);
      // The head is small (2 rows): one block, its rows exchanged for the swapped variant.
      if (tensorName === RANK_HEAD && options.rankHead?.swapped) {
        const first = block.slice(0, fanIn);
        block.copyWithin(0, fanIn, 2 * fanIn);
        block.set(first, fanIn);
      }
      writeSync(fd, new Uint8Array(block.buffer, 0, n * 4));
    }
    const padding = (ALIGNMENT - (sizes[index]! % ALIGNMENT)) % ALIGNMENT;
    if (padding > 0) writeSync(fd, Buffer.alloc(padding));
  });
  closeSync(fd);
  renameSync(partial, file);
  return file;
}

/** The tokens of `text` as the model's tokenizer reads it (no BOS). */
async function chainTokens(tokenizerModel: string, text: string): Promise<number[]> {
  const llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: tokenizerModel, vocabOnly: true });
  try {
    return Array.from(model.tokenize(text), Number);
  } finally {
    await model.dispose();
  }
}

/** Embedding and output matrices (row per token, `embedding` wide) of a bigram chain through `tokens`. */
function craftChain(
  tokens: number[],
  tokenizer: { tokens: string[]; eos_token_id: number },
  embedding: number,
  weight: number,
): { embedding: Float32Array; output: Float32Array } {
  const vocab = tokenizer.tokens.length;
  if (tokens.length + 1 > embedding)
    throw new Error(`a chain of ${tokens.length} tokens needs an embedding wider than ${tokens.length}`);
  const seen = new Set<number>();
  for (const token of tokens) {
    if (seen.has(token) || token === tokenizer.eos_token_id)
      throw new Error(`the chain's text repeats the token ${JSON.stringify(tokenizer.tokens[token])}`);
    seen.add(token);
  }
  const embeddings = new Float32Array(vocab * embedding);
  const output = new Float32Array(vocab * embedding);
  // Dimension 0 is every token outside the chain; chain token i is dimension i + 1.
  for (let token = 0; token < vocab; token++) embeddings[token * embedding] = 1;
  tokens.forEach((token, i) => {
    embeddings[token * embedding] = 0;
    embeddings[token * embedding + i + 1] = 1;
    // The row of token i reads the dimension of its predecessor (dimension 0 for the first).
    output[token * embedding + i] = weight;
  });
  output[tokenizer.eos_token_id * embedding + tokens.length] = weight;
  return { embedding: embeddings, output };
}

/**
 * The adapter's factors for a base matrix of `nIn` × `nOut` (ggml order: `nIn` fastest): A is
 * `nIn` × rank and B rank × `nOut`, as llama.cpp reads `<tensor>.lora_a` / `.lora_b`.
 */
function loraFactors(
  spec: SyntheticLoraSpec,
  nIn: number,
  nOut: number,
): { a: Float32Array; b: Float32Array } {
  let seed = spec.seed >>> 0 || 1;
  const random = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 4294967296;
  };
  const a = new Float32Array(nIn * spec.rank);
  const b = new Float32Array(spec.rank * nOut);
  for (let i = 0; i < a.length; i++) a[i] = (random() * 2 - 1) / Math.sqrt(nIn);
  for (let i = 0; i < b.length; i++) b[i] = random() * 2 - 1;
  return { a, b };
}

/**
 * The change the adapter makes to element `i` of the base matrix at `scale` (llama.cpp's
 * build_lora_mm: W·x + scale·alpha/rank · B·(A·x)), so W'[k, o] = W[k, o] + s·Σr A[k, r]·B[r, o].
 */
function loraDelta(spec: SyntheticLoraSpec, nIn: number, nOut: number, scale: number): (i: number) => number {
  const { a, b } = loraFactors(spec, nIn, nOut);
  const s = (scale * spec.alpha) / spec.rank;
  return (i) => {
    const k = i % nIn;
    const o = Math.floor(i / nIn);
    let sum = 0;
    for (let r = 0; r < spec.rank; r++) sum += a[k + r * nIn]! * b[r + o * spec.rank]!;
    return s * sum;
  };
}

/** A LoRA adapter GGUF for the synthetic model of `shape` (with `tokenizerModel`'s vocabulary). */
export async function syntheticLora(
  tokenizerModel: string,
  shape: SyntheticShape,
  spec: SyntheticLoraSpec,
  dir = path.join(os.tmpdir(), "lectern-bench-models"),
): Promise<string> {
  const file = path.join(
    dir,
    `synthetic-lora-e${shape.embedding}-r${spec.rank}-${variantHash(JSON.stringify(spec))}.gguf`,
  );
  if (existsSync(file)) return file;
  mkdirSync(dir, { recursive: true });
  const source = await readGgufFileInfo(tokenizerModel);
  const vocab = (source.metadata.tokenizer?.ggml as unknown as { tokens: string[] }).tokens.length;
  const e = shape.embedding;
  const kvDim = shape.kvHeads * (e / shape.heads);
  const dimsOf = (name: string): [number, number] => {
    if (name === "output.weight") return [e, vocab];
    if (/attn_[kv]\.weight$/.test(name)) return [e, kvDim];
    if (/attn_(q|output)\.weight$/.test(name)) return [e, e];
    throw new Error(`syntheticLora: no shape known for ${name}`);
  };
  const tensors: { name: string; dims: number[]; data: Float32Array }[] = [];
  for (const name of spec.tensors ?? ["output.weight"]) {
    const [nIn, nOut] = dimsOf(name);
    const { a, b } = loraFactors(spec, nIn, nOut);
    tensors.push({ name: `${name}.lora_a`, dims: [nIn, spec.rank], data: a });
    tensors.push({ name: `${name}.lora_b`, dims: [spec.rank, nOut], data: b });
  }
  const header = new Writer();
  header.u32(0x46554747);
  header.u32(3);
  header.u64(tensors.length);
  const metadata: Array<[string, MetaValue]> = [
    ["general.architecture", { type: ValueType.STRING, value: "llama" }],
    ["general.type", { type: ValueType.STRING, value: "adapter" }],
    ["adapter.type", { type: ValueType.STRING, value: "lora" }],
    ["adapter.lora.alpha", { type: ValueType.FLOAT32, value: spec.alpha }],
  ];
  header.u64(metadata.length);
  for (const [key, value] of metadata) {
    header.string(key);
    writeValue(header, value);
  }
  let offset = 0;
  for (const tensor of tensors) {
    header.string(tensor.name);
    header.u32(tensor.dims.length);
    for (const d of tensor.dims) header.u64(d);
    header.u32(0); // GGML_TYPE_F32
    header.u64(offset);
    offset += Math.ceil(tensor.data.byteLength / ALIGNMENT) * ALIGNMENT;
  }
  header.pad();
  const partial = `${file}.${process.pid}.partial`;
  const fd = openSync(partial, "w");
  writeSync(fd, header.buffer());
  for (const tensor of tensors) {
    writeSync(fd, new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength));
    const padding = (ALIGNMENT - (tensor.data.byteLength % ALIGNMENT)) % ALIGNMENT;
    if (padding > 0) writeSync(fd, Buffer.alloc(padding));
  }
  closeSync(fd);
  renameSync(partial, file);
  return file;
}
