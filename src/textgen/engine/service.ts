/**
 * What every route calls. `resolveModel(name, role)` picks the model a request names (404 listing the
 * known names, or 400 when the model cannot serve the role); the returned handle runs the request on
 * that model: it holds the model (loading it first when needed) for the request's duration, admits
 * it through the model's own scheduler, and counts tokens in metrics labelled by model. Streaming
 * routes get an `onStart` hook so they open their stream only once the request holds a sequence
 * (until then it can still get a plain JSON 429/504).
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { badRequest, DomainError } from "../../core/errors.js";
import type { EmbeddingResult } from "./embedder.js";
import type {
  CompletionResult,
  GenerationRequest,
  Generator,
  GeneratorStatus,
  TextTokenizer,
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
import type { Priority } from "./scheduler.js";

export interface RunHooks {
  /** Called when generation is about to start (a sequence is held). */
  onStart?: () => void;
  /**
   * "batch" for a line of a batch: admitted after interactive requests, and preempted by them (the
   * run then rejects with scheduler.ts's PreemptedError: submit the line again). Default interactive.
   */
  priority?: Priority;
}

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
  run(request: GenerationRequest, signal: AbortSignal, hooks?: RunHooks): Promise<CompletionResult>;
  embed(inputs: readonly string[], signal?: AbortSignal): Promise<EmbeddingResult>;
  rerank(query: string, documents: readonly string[], signal?: AbortSignal): Promise<RankResult>;
  /** The model's tokenizer (loads the model); a 400 where generation is remote. */
  tokenizer(): Promise<TextTokenizer>;
  /** Tokens of a request's prompt as the model's chat template renders it (validating the request). */
  countTokens(request: GenerationRequest): Promise<number>;
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
  embeddingId: string | null;
  /** The default model's generator while its first load runs (its status is the freshest). */
  startingGenerator?: () => Generator | undefined;
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
   * The name responses and model lists report for model `id`: the id, or in single-model mode the
   * model's own `general.name` once known (as before there was a registry).
   */
  nameOf(id: string): string {
    if (this.view.multiModel) return id;
    const backend = this.models.loadedBackend(id);
    const generator = backend?.generator ?? this.startingGenerator(id);
    return generator?.modelName ?? backend?.embedder?.modelName() ?? id;
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
      run: (request, signal, hooks = {}) =>
        withModel("generate", (backend) =>
          this.generate(id, backend, lora && !request.lora ? { ...request, lora } : request, signal, hooks),
        ),
      embed: (inputs, signal) =>
        withModel("embed", (backend) =>
          backend.scheduler.run(signal, () => backend.embedder!.embed(inputs, signal)),
        ),
      rerank: (query, documents, signal) =>
        withModel("rerank", (backend) =>
          backend.scheduler.run(signal, (runSignal) => backend.ranker!.rank(query, documents, runSignal)),
        ),
      countTokens: (request) =>
        withModel("generate", (backend) =>
          backend.generator!.validate(lora && !request.lora ? { ...request, lora } : request),
        ),
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
    hooks: RunHooks,
  ): Promise<CompletionResult> {
    await generator!.validate(request);
    const priority = hooks.priority ?? request.priority ?? "interactive";
    return scheduler.run(
      clientSignal,
      async (signal) => {
        hooks.onStart?.();
        const started = performance.now();
        const result = await generator!.generate({
          ...request,
          priority,
          signal,
          onTokens: (count) => {
            this.tokens.inc({ model }, count);
            request.onTokens?.(count);
          },
        });
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
    hooks: RunHooks = {},
  ): Promise<CompletionResult> {
    return this.resolveModel(undefined, "generate").run(request, clientSignal, hooks);
  }

  /** Readiness as /health reports it: the default model's state. */
  health(): { status: GeneratorStatus; modelName?: string; failed: ModelInfo[] } {
    const id = this.models.defaultId;
    const info = this.models.get(id)!;
    const failed = this.models.list().filter((model) => model.status === "failed");
    const generator = this.models.loadedBackend(id)?.generator ?? this.startingGenerator(id);
    if (generator) {
      const status = generator.status();
      return { status, modelName: view(this.view, id, generator.modelName), failed };
    }
    if (info.status === "failed")
      return { status: { state: "unhealthy", reason: info.reason ?? "" }, failed };
    if (info.status === "loading") return { status: { state: "loading" }, failed };
    // Unloaded (idle or evicted): it loads again on the next request.
    return { status: { state: "ready" }, modelName: view(this.view, id, id), failed };
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

function view(models: ModelsView, id: string, ownName: string): string {
  return models.multiModel ? id : ownName;
}
