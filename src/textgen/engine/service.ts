/**
 * What every route calls. `resolveModel(name, role)` picks the model a request names (404 listing the
 * known names, or 400 when the model cannot serve the role); the returned handle runs the request on
 * that model: it holds the model (loading it first when needed) for the request's duration, admits
 * it through the model's own scheduler, and counts tokens in metrics labelled by model. Streaming
 * routes get an `onStart` hook so they open their stream only once the request holds a sequence
 * (until then it can still get a plain JSON 429/504).
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { badRequest, DomainError, tooLarge } from "../../core/errors.js";
import type { EmbeddingResult } from "./embedder.js";
import type { EventListener } from "./events.js";
import {
  isChatRequest,
  type CompletionResult,
  type GenerationRequest,
  type Generator,
  type GeneratorStatus,
  type TextTokenizer,
} from "./generator.js";
import type { ModelRole } from "./gguf-check.js";
import type { ServingBackend } from "./model-backends.js";
import {
  ModelNotFoundError,
  ModelRoleError,
  parseKeepAlive,
  type ModelInfo,
  type ModelRegistry,
} from "./model-registry.js";
import type { RankResult } from "./rerank.js";
import type { LoraSelection } from "./presets.js";

/** One LoRA adapter of a model, as llama.cpp's server lists it in GET /lora-adapters. */
export interface LoraAdapterInfo {
  id: number;
  path: string;
  /** The scale requests get when they name no adapters (0: loaded, not applied). */
  scale: number;
}

/** A request's model: everything a route needs from it. Each call holds the model while it runs. */
export interface ServedModel {
  /** The name responses report (in single-model mode the model's own `general.name`, as before). */
  readonly name: string;
  readonly id: string;
  /**
   * Generates; `listener` gets the answer's parts (events.ts), first `start` once the request holds a
   * sequence (until then it can still fail with a plain 429/504 that no stream has begun).
   */
  run(request: GenerationRequest, signal: AbortSignal, listener?: EventListener): Promise<CompletionResult>;
  /** `priority` "batch": a batch line's, admitted after interactive requests (scheduler.ts). */
  embed(
    inputs: readonly string[],
    signal?: AbortSignal,
    priority?: "interactive" | "batch",
  ): Promise<EmbeddingResult>;
  rerank(query: string, documents: readonly string[], signal?: AbortSignal): Promise<RankResult>;
  /** The model's tokenizer (loads the model); a 400 where generation is remote. */
  tokenizer(): Promise<TextTokenizer>;
  /** Tokens of a request's prompt as the model's chat template renders it (validating the request). */
  countTokens(request: GenerationRequest): Promise<number>;
  /**
   * Tokens one request may hold, prompt plus answer (loads the model): what a caller budgets a
   * prompt against, e.g. RAG fitting its sources. Undefined where generation is remote.
   */
  contextPerSequence(): Promise<number | undefined>;
  /**
   * Loads the model and leaves it to its keep_alive, or with keep_alive 0 unloads it (after its
   * running requests), as Ollama's generate without a prompt does. Resolves to what was done.
   */
  preload(): Promise<"load" | "unload">;
}

export interface ResolveOptions {
  /** Ollama's keep_alive: how long the model stays loaded after this request ("5m", 300, 0, -1). */
  keepAlive?: string | number;
}

export interface ModelsView {
  multiModel: boolean;
  /** The default model is a remote upstream's (GENERATION_UPSTREAM_URL), named by its own id. */
  remote?: boolean;
  embeddingId: string | null;
  /** The default model's generator while its first load runs (its status is the freshest). */
  startingGenerator?: () => Generator | undefined;
  /** MAX_TOKENIZE_CHARS: characters one request may have tokenized (see `checkTokenizable`). */
  maxTokenizeChars?: number;
}

/** Characters of text a request's prompt is made of: what tokenizing it costs grows with. */
export function promptChars(request: GenerationRequest): number {
  if (!isChatRequest(request)) return request.prompt.length;
  let chars = request.tools === undefined ? 0 : JSON.stringify(request.tools).length;
  for (const message of request.messages) {
    chars += message.content.length;
    for (const call of message.toolCalls ?? []) chars += call.name.length + call.arguments.length;
  }
  return chars;
}

/**
 * The decode loops' own account of their time (batcher.ts StepTimings), per loaded local model: how
 * much of a step llama.cpp's decode takes and how much the batcher adds around it. Counters, so a
 * rate over an interval gives the mean step and its parts.
 */
function stepMetrics(models: ModelRegistry<ServingBackend>, registry: Registry): void {
  const timingsOf = function* () {
    for (const [id, backend] of models.loadedBackends()) {
      const timings = backend.generator?.stepTimings?.();
      if (timings) yield [id, timings] as const;
    }
  };
  new Counter({
    name: "lectern_decode_steps_total",
    help: "Decode steps run by the continuous batcher (one llama_decode each)",
    labelNames: ["model"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [model, timings] of timingsOf()) this.inc({ model }, timings.steps);
    },
  });
  new Counter({
    name: "lectern_decode_step_sequences_total",
    help: "Sequences served by decode steps, summed over the steps (their mean batch width × steps)",
    labelNames: ["model"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [model, timings] of timingsOf()) this.inc({ model }, timings.sequences);
    },
  });
  new Counter({
    name: "lectern_decode_step_seconds_total",
    help: "Wall time of decode steps by phase: plan (admit, prefixes, guesses, batch), decode (llama_decode), sample, accept",
    labelNames: ["model", "phase"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [model, t] of timingsOf()) {
        this.inc({ model, phase: "plan" }, t.planMs / 1000);
        this.inc({ model, phase: "decode" }, t.decodeMs / 1000);
        this.inc({ model, phase: "sample" }, t.sampleMs / 1000);
        this.inc({ model, phase: "accept" }, t.acceptMs / 1000);
      }
    },
  });
}

export class TextgenService {
  private readonly tokens: Counter<"model">;
  private readonly generations: Counter<"finish_reason" | "model">;
  private readonly duration: Histogram<"model">;
  private readonly tokensPerSecond: Gauge<"model">;
  private closing = false;

  constructor(
    readonly models: ModelRegistry<ServingBackend>,
    private readonly view: ModelsView,
    registry: Registry,
  ) {
    this.tokens = new Counter({
      name: "lectern_generated_tokens_total",
      help: "Tokens generated, counted as they are produced",
      labelNames: ["model"],
      registers: [registry],
    });
    this.generations = new Counter({
      name: "lectern_generations_total",
      help: "Generations finished, by finish reason",
      labelNames: ["finish_reason", "model"],
      registers: [registry],
    });
    this.duration = new Histogram({
      name: "lectern_generation_duration_seconds",
      help: "Time from holding a sequence to the last token",
      labelNames: ["model"],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers: [registry],
    });
    this.tokensPerSecond = new Gauge({
      name: "lectern_tokens_per_second",
      help: "Decode speed of the last finished generation",
      labelNames: ["model"],
      registers: [registry],
    });
    const perModel = (gauge: Gauge<"model">, read: (backend: ServingBackend) => number) => {
      gauge.reset();
      for (const [id, backend] of models.loadedBackends()) gauge.set({ model: id }, read(backend));
    };
    new Gauge({
      name: "lectern_queue_depth",
      help: "Requests waiting for a sequence",
      labelNames: ["model"],
      registers: [registry],
      collect() {
        perModel(this, (backend) => backend.scheduler.stats().queued);
      },
    });
    new Gauge({
      name: "lectern_running_generations",
      help: "Generations holding a sequence",
      labelNames: ["model"],
      registers: [registry],
      collect() {
        perModel(this, (backend) => backend.scheduler.stats().running);
      },
    });
    new Gauge({
      name: "lectern_model_loads",
      help: "Model loads started (concurrent first requests share one)",
      labelNames: ["model"],
      registers: [registry],
      collect() {
        for (const model of models.list()) this.set({ model: model.id }, model.loads);
      },
    });
    stepMetrics(models, registry);
    new Gauge({
      name: "lectern_models_loaded",
      help: "Models loaded now",
      registers: [registry],
      collect() {
        this.set(models.loadedBackends().length);
      },
    });
  }

  /** Whether several models are served (unknown names are then refused). */
  get multiModel(): boolean {
    return this.view.multiModel;
  }

  /**
   * The model a request's `model` field names, for `role`. Without a registry any name is the one
   * model (as llama-server's single-model mode); with one, an unknown name is a 404 listing the known
   * names. A model that cannot serve `role` is a 400. Loading happens when the handle is used.
   */
  resolveModel(name: string | undefined, role: ModelRole, options: ResolveOptions = {}): ServedModel {
    if (this.closing)
      throw new DomainError("not_ready", "The server is shutting down; retry on another replica or later", {
        retryAfter: "5",
      });
    const id = this.pickModel(name, role);
    const roles = this.models.rolesOf(id);
    if (!roles.includes(role)) throw new ModelRoleError(id, role, roles);
    let keepAliveMs: number | undefined;
    if (options.keepAlive !== undefined) {
      try {
        keepAliveMs = parseKeepAlive(options.keepAlive);
      } catch (error) {
        throw badRequest(`keep_alive: ${(error as Error).message}`, [{ path: "/keep_alive" }]);
      }
    }
    // A LoRA alias (a preset's `base` section) serves its base model with its adapters.
    return this.handle(id, keepAliveMs, name === undefined ? undefined : this.models.loraOf(name));
  }

  /**
   * The adapters of the model `name` means (the default model without a name), for GET
   * /lora-adapters and model lists; a 404 for an unknown name.
   */
  loraAdapters(name?: string): LoraAdapterInfo[] {
    const id = this.pickModel(name, "generate");
    return this.models.get(id)?.adapters ?? [];
  }

  /**
   * 413 for text longer than MAX_TOKENIZE_CHARS. llama.cpp's tokenizer is synchronous (node-llama-cpp's
   * `tokenize` is a native call on the event loop, with no async form), so a 1 MiB prompt held every
   * other request, /health included, for 0.5–6 s; the cap bounds that wait (131,072 characters, the
   * default, took 0.4 s on a loaded 2-core machine with the test model).
   */
  checkTokenizable(chars: number, what = "The prompt"): void {
    const max = this.view.maxTokenizeChars;
    if (max === undefined || chars <= max) return;
    throw tooLarge(
      `${what} is ${chars} characters; this server tokenizes at most ${max} per request (MAX_TOKENIZE_CHARS)`,
      [{ chars, max_chars: max, setting: "MAX_TOKENIZE_CHARS" }],
    );
  }

  /** The default model for a role: MODEL_PATH for generation, EMBEDDING_MODEL_PATH for embeddings. */
  private pickModel(name: string | undefined, role: ModelRole): string {
    if (name !== undefined && name !== "") {
      const entry = this.models.find(name);
      if (entry) return entry.id;
      if (this.view.multiModel) throw new ModelNotFoundError(name, this.models.knownNames());
    }
    const { defaultId } = this.models;
    if (role === "embed" && this.view.embeddingId) return this.view.embeddingId;
    if (this.models.rolesOf(defaultId).includes(role)) return defaultId;
    const other = this.models.list().find((model) => model.roles.includes(role));
    if (other) return other.id;
    if (role === "rerank")
      throw badRequest("No reranker is served here: add a GGUF with a rank head to MODELS_DIR", [
        { path: "/model" },
      ]);
    return defaultId;
  }

  /**
   * The one name of model `id` in every response, model list, log line and the CLI: its registry id
   * (the file name without `.gguf`, or the preset's section name), never the GGUF's `general.name`
   * (often just the architecture, "llama"). A remote upstream's model keeps the upstream's id.
   */
  nameOf(id: string): string {
    if (this.view.remote && id === this.models.defaultId)
      return this.models.loadedBackend(id)?.generator?.modelName ?? id;
    return id;
  }

  private handle(id: string, keepAliveMs: number | undefined, lora: LoraSelection | undefined): ServedModel {
    const models = this.models;
    const nameOf = (model: string) => this.nameOf(model);
    const withModel = async <T>(
      role: ModelRole,
      work: (backend: ServingBackend) => Promise<T>,
    ): Promise<T> => {
      const lease = await models.acquire(id, role);
      try {
        return await work(lease.backend);
      } finally {
        lease.release(keepAliveMs);
      }
    };
    return {
      id,
      get name() {
        return nameOf(id);
      },
      contextPerSequence: () =>
        withModel("generate", async (backend) => backend.generator!.contextPerSequence?.()),
      run: async (request, signal, listener) => {
        this.checkTokenizable(promptChars(request));
        const withLora = lora && !request.lora ? { ...request, lora } : request;
        return withModel("generate", (backend) => this.generate(id, backend, withLora, signal, listener));
      },
      embed: (inputs, signal, priority) =>
        withModel("embed", (backend) =>
          backend.scheduler.run(signal, () => backend.embedder!.embed(inputs, signal), { priority }),
        ),
      rerank: (query, documents, signal) =>
        withModel("rerank", (backend) =>
          backend.scheduler.run(signal, (runSignal) => backend.ranker!.rank(query, documents, runSignal)),
        ),
      countTokens: async (request) => {
        this.checkTokenizable(promptChars(request));
        return withModel("generate", (backend) =>
          backend.generator!.validate(lora && !request.lora ? { ...request, lora } : request),
        );
      },
      preload: async () => {
        if (keepAliveMs === 0) {
          await models.unload(id);
          return "unload";
        }
        await withModel(models.rolesOf(id)[0]!, async () => undefined);
        return "load";
      },
      tokenizer: () =>
        withModel("generate", async (backend) => {
          const generator = backend.generator!;
          if (!generator.tokenizer)
            throw badRequest(
              "Tokenizing needs a local model; generation is forwarded to GENERATION_UPSTREAM_URL",
            );
          return generator.tokenizer();
        }),
    };
  }

  private async generate(
    model: string,
    { generator, scheduler }: ServingBackend,
    request: GenerationRequest,
    clientSignal: AbortSignal,
    listener: EventListener | undefined,
  ): Promise<CompletionResult> {
    // The prompt is counted here, before the first token, so a stream's opening can report it.
    const promptTokens = await generator!.validate(request);
    // A batch line is admitted after interactive requests and preempted by them (scheduler.ts).
    const priority = request.priority ?? "interactive";
    return scheduler.run(
      clientSignal,
      async (signal) => {
        listener?.({ type: "start", promptTokens });
        const started = performance.now();
        const result = await generator!.generate(
          {
            ...request,
            priority,
            signal,
            onTokens: (count) => {
              this.tokens.inc({ model }, count);
              request.onTokens?.(count);
            },
          },
          listener,
        );
        const seconds = (performance.now() - started) / 1000;
        this.duration.observe({ model }, seconds);
        if (result.tokensGenerated > 0 && seconds > 0)
          this.tokensPerSecond.set({ model }, result.tokensGenerated / seconds);
        this.generations.inc({ finish_reason: result.finishReason, model });
        return result;
      },
      { priority },
    );
  }

  /** Generation on the default model (routes without a `model` field). */
  run(
    request: GenerationRequest,
    clientSignal: AbortSignal,
    listener?: EventListener,
  ): Promise<CompletionResult> {
    return this.resolveModel(undefined, "generate").run(request, clientSignal, listener);
  }

  /** Readiness as /health reports it: the default model's state. */
  health(): {
    status: GeneratorStatus;
    modelName?: string;
    architecture?: string;
    failed: ModelInfo[];
  } {
    const id = this.models.defaultId;
    const info = this.models.get(id)!;
    const failed = this.models.list().filter((model) => model.status === "failed");
    const named = {
      modelName: this.nameOf(id),
      ...(info.architecture !== null && { architecture: info.architecture }),
    };
    const generator = this.models.loadedBackend(id)?.generator ?? this.startingGenerator(id);
    if (generator) return { status: generator.status(), ...named, failed };
    if (info.status === "failed")
      return { status: { state: "unhealthy", reason: info.reason ?? "" }, failed };
    if (info.status === "loading") return { status: { state: "loading" }, failed };
    // Unloaded (idle or evicted): it loads again on the next request.
    return { status: { state: "ready" }, ...named, failed };
  }

  /** Model `id`'s generator when loaded (or the default model's while its first load settles). */
  generatorOf(id: string): Generator | undefined {
    return this.models.loadedBackend(id)?.generator ?? this.startingGenerator(id);
  }

  /** The default model's generator while the registry's first load of it is still settling. */
  private startingGenerator(id: string): Generator | undefined {
    if (id !== this.models.defaultId || this.models.get(id)?.status !== "loading") return undefined;
    return this.view.startingGenerator?.();
  }

  /** Schedulers of the loaded models, for a graceful shutdown. */
  async shutdown(graceMs: number): Promise<void> {
    this.closing = true;
    await Promise.all(this.models.loadedBackends().map(([, backend]) => backend.scheduler.shutdown(graceMs)));
  }
}
