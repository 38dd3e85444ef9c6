/**
 * node-llama-cpp called directly, in-process: the reference /predict is measured against. It loads the
 * model as src/textgen/engine/llama-generator.ts does (getLlama with build "never", the same threads, context
 * size per sequence and sequences) and generates with node-llama-cpp's own
 * LlamaCompletion and the same sampling settings. What differs is everything of ours: HTTP,
 * validation, scheduling and our continuous batcher in place of node-llama-cpp's evaluation loop.
 */
import {
  getLlama,
  LlamaCompletion,
  LlamaLogLevel,
  type Llama,
  type LlamaContext,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";

export interface DirectOptions {
  modelPath: string;
  threads: number;
  /** Tokens per sequence, as the generator computes it (LLAMA_CONTEXT_SIZE / MAX_CONCURRENT). */
  contextSizePerSequence: number;
  sequences: number;
}

export interface DirectCompletion {
  text: string;
  tokens: number;
  promptTokens: number;
  ms: number;
  /** From the call to the first text piece (what an SSE client sees as its first event). */
  firstTextMs: number | null;
}

export interface DirectRequest {
  prompt: string;
  maxTokens: number;
  temperature: number;
  seed?: number;
}

let llamaPromise: Promise<Llama> | undefined;
const models = new Map<string, Promise<LlamaModel>>();

async function loadModel(modelPath: string): Promise<LlamaModel> {
  llamaPromise ??= getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
  const llama = await llamaPromise;
  let model = models.get(modelPath);
  if (!model) {
    model = llama.loadModel({ modelPath });
    models.set(modelPath, model);
  }
  return model;
}

export class DirectLlama {
  private readonly free: LlamaCompletion[] = [];

  private constructor(
    readonly model: LlamaModel,
    readonly context: LlamaContext,
  ) {
    for (let i = 0; i < context.totalSequences; i++) {
      this.free.push(
        new LlamaCompletion({ contextSequence: context.getSequence(), autoDisposeSequence: false }),
      );
    }
  }

  static async create(options: DirectOptions): Promise<DirectLlama> {
    const model = await loadModel(options.modelPath);
    const context = await model.createContext({
      contextSize: options.contextSizePerSequence,
      sequences: options.sequences,
      threads: options.threads,
    });
    return new DirectLlama(model, context);
  }

  promptTokens(prompt: string): number {
    return this.model.tokenize(prompt).length + (this.model.tokens.bos === null ? 0 : 1);
  }

  /** One completion on a free sequence; run at most `sequences` at once. */
  async complete(request: DirectRequest): Promise<DirectCompletion> {
    const completion = this.free.pop();
    if (!completion) throw new Error("no free sequence: run at most `sequences` completions at once");
    const started = performance.now();
    let firstTextMs: number | null = null;
    let tokens = 0;
    try {
      const result = await completion.generateCompletionWithMeta(request.prompt, {
        maxTokens: request.maxTokens,
        temperature: request.temperature,
        seed: request.seed,
        // What LlamaGenerator passes when a request names no penalty (LlamaCompletion's own default
        // would apply one).
        repeatPenalty: false,
        disableContextShift: true,
        onToken: (chunk: Token[]) => {
          tokens += chunk.length;
        },
        onTextChunk: () => {
          firstTextMs ??= performance.now() - started;
        },
      });
      const ms = performance.now() - started;
      return {
        text: result.response,
        tokens,
        promptTokens: this.promptTokens(request.prompt),
        ms,
        firstTextMs,
      };
    } finally {
      this.free.push(completion);
    }
  }

  async dispose(): Promise<void> {
    await this.context.dispose();
  }
}
