/**
 * Which models are loaded, and when they load and unload. A request leases its model for as long as
 * it runs: the first lease of an unloaded model loads it (concurrent first leases share one load),
 * and a leased model is never unloaded. Loads of different models run side by side, so a request to
 * a loaded model never waits for another model's load. Idle models unload least recently used first
 * when MODELS_MAX_LOADED or MODELS_MEMORY_BUDGET would be exceeded, and after their keep-alive.
 * Written here because the policy (leases, keep-alive as Ollama's, limits as llama-server's router)
 * is the product's and no package holds llama.cpp models.
 */
import { statSync } from "node:fs";
import path from "node:path";
import { ApiError, conflict, DomainError, notReady } from "../../core/errors.js";
import {
  estimateModelBytes,
  inspectGguf,
  ModelFileError,
  type GgufSummary,
  type ModelRole,
} from "./gguf-check.js";
import type { KvCacheType, LoraSelection, ModelEntry } from "./presets.js";
import { isRemoteModelReference } from "../../core/config.js";

export type ModelStatus = "loaded" | "loading" | "unloaded" | "failed";

/** What a loaded model serves with; each has its own scheduler and batcher. */
export interface ModelBackend {
  close(): Promise<void>;
}

export interface ModelInfo {
  id: string;
  aliases: string[];
  status: ModelStatus;
  reason?: string;
  roles: ModelRole[];
  /** The GGUF's `general.architecture` ("llama", "qwen2"…); null until the file has been read. */
  architecture: string | null;
  /** Bytes of the file; null until known (a reference not downloaded yet). */
  sizeBytes: number | null;
  /** Estimated memory when loaded (weights + KV cache of its type). */
  memoryBytes: number | null;
  /** LoRA adapters loaded with it (ids are indexes), with the scale requests get by default. */
  adapters: { id: number; path: string; scale: number }[];
  /** Names serving it with adapters (a preset's `base` sections) and the scales they apply. */
  loraAliases: { name: string; lora: LoraSelection }[];
  reference: string;
  inUse: number;
  default: boolean;
  /** Loads started since the server started (a reload after an unload counts again). */
  loads: number;
  /** The local file: the reference's path, or its download once resolved; null until then. */
  file: string | null;
  /** When a loaded model's keep-alive ends (epoch ms), counted from now while in use; null: never. */
  expiresAt: number | null;
}

export interface RegistryOptions<B extends ModelBackend> {
  entries: ModelEntry[];
  defaultId: string;
  /** Downloads or finds the file of a reference (local paths as they are). */
  resolveFile: (entry: ModelEntry) => Promise<string>;
  /** Loads the checked file into a backend. */
  createBackend: (entry: ModelEntry, file: string, summary: GgufSummary) => Promise<B>;
  /** Context tokens a model's KV cache holds (all sequences), for the memory estimate. */
  contextTokensOf: (entry: ModelEntry, summary: GgufSummary) => number;
  /** The KV cache's type, for the memory estimate (default f16). */
  kvCacheTypeOf?: (entry: ModelEntry) => KvCacheType;
  /** 0 = no limit. */
  maxLoaded: number;
  /** Bytes; 0 = no limit. */
  memoryBudget: number;
  /** Idle time before a model unloads, for models other than the default; -1 = never. */
  defaultKeepAliveMs: number;
  log?: (line: string) => void;
  /** Backends that are always there (a remote upstream): never loaded, unloaded or counted. */
  pinned?: Record<string, B>;
}

interface ModelState<B> {
  entry: ModelEntry;
  status: ModelStatus;
  reason?: string;
  backend?: B;
  loading?: Promise<B>;
  /** A background unload in progress; a new load waits for it, so memory is returned first. */
  unloading?: Promise<void>;
  summary?: GgufSummary;
  /** The file a failure is remembered for (size and time), so a replaced file is tried again. */
  failedFile?: string;
  failedStamp?: string;
  /** The local file, once resolved (downloaded). */
  file?: string;
  inUse: number;
  loads: number;
  lastUsed: number;
  keepAliveMs: number;
  idleTimer?: NodeJS.Timeout;
  pinned?: boolean;
}

/** A model held by a request; `release` once the request is done with it. */
export interface Lease<B> {
  readonly id: string;
  readonly backend: B;
  /**
   * `keepAliveMs`: the request's keep_alive (0 unloads now, -1 never); the model's current one when
   * absent. Other values only lengthen the model's stay (see `longerStay`).
   */
  release(keepAliveMs?: number): void;
}

export class ModelNotFoundError extends DomainError {
  constructor(name: string, known: string[]) {
    super("not_found", `The model "${name}" does not exist; known models: ${known.join(", ")}`, {
      details: [{ path: "/model" }],
    });
  }
}

export class ModelRoleError extends DomainError {
  constructor(id: string, role: ModelRole, roles: ModelRole[]) {
    const what = { generate: "generate text", embed: "compute embeddings", rerank: "rerank documents" };
    super(
      "invalid",
      `The model "${id}" cannot ${what[role]}: it is ${roles.includes("rerank") ? "a reranker" : roles.includes("generate") ? "a generation model" : "an embedding model"}` +
        (role === "rerank" ? " without a rank (classification) head" : ""),
      { details: [{ path: "/model" }] },
    );
  }
}

export class ModelRegistry<B extends ModelBackend> {
  private readonly states = new Map<string, ModelState<B>>();
  private readonly byName = new Map<string, ModelState<B>>();
  private closed = false;

  constructor(private readonly options: RegistryOptions<B>) {
    for (const entry of options.entries) this.addState(entry);
  }

  private addState(entry: ModelEntry): ModelState<B> {
    const state: ModelState<B> = {
      entry,
      status: "unloaded",
      inUse: 0,
      loads: 0,
      lastUsed: 0,
      keepAliveMs: entry.id === this.options.defaultId ? -1 : this.options.defaultKeepAliveMs,
    };
    const pinned = this.options.pinned?.[entry.id];
    if (pinned) Object.assign(state, { backend: pinned, status: "loaded", pinned: true, keepAliveMs: -1 });
    this.states.set(entry.id, state);
    for (const name of namesOf(entry)) this.byName.set(name, state);
    return state;
  }

  /**
   * Serves one more local file (a model pulled while running) under its entry's id, reading what it
   * is first; an entry of that id already there is kept. Returns the id it is served under.
   */
  async add(entry: ModelEntry): Promise<string> {
    const existing = this.byName.get(entry.id);
    if (existing) return existing.entry.id;
    const summary = await inspectGguf(entry.reference);
    // Checked again: another add of the same id may have finished while this one read the file.
    const raced = this.byName.get(entry.id);
    if (raced) return raced.entry.id;
    this.addState(entry).summary = summary;
    return entry.id;
  }

  /**
   * Forgets a model that is neither loaded, loading nor in use (its file deleted); a model that is
   * is a 409, and the default model always is.
   */
  remove(id: string): void {
    const state = this.require(id);
    if (state.entry.id === this.options.defaultId || state.backend || state.loading || state.inUse > 0)
      throw conflict(`The model "${state.entry.id}" is being served; it cannot be deleted`);
    this.states.delete(state.entry.id);
    for (const name of namesOf(state.entry)) this.byName.delete(name);
  }

  get defaultId(): string {
    return this.options.defaultId;
  }

  /** Reads what each local file is (roles, size), without loading anything. */
  async inspectLocal(): Promise<void> {
    await Promise.all(
      [...this.states.values()].map(async (state) => {
        if (state.pinned || isRemoteModelReference(state.entry.reference)) return;
        try {
          state.summary = await inspectGguf(state.entry.reference);
        } catch (error) {
          this.fail(state, error, state.entry.reference);
        }
      }),
    );
  }

  /** The entry a request's name means, or undefined. */
  find(name: string): ModelEntry | undefined {
    return this.byName.get(name)?.entry;
  }

  knownNames(): string[] {
    return [...this.states.values()].flatMap((state) => namesOf(state.entry));
  }

  /** The adapter scales a LoRA alias applies (a preset's `base` section), or undefined for other names. */
  loraOf(name: string): LoraSelection | undefined {
    return this.byName.get(name)?.entry.loraAliases?.[name];
  }

  /** The estimate the limits use: weights plus the KV cache, of the model's KV type. */
  private estimate(state: ModelState<B>, summary: GgufSummary): number {
    return estimateModelBytes(
      summary,
      this.options.contextTokensOf(state.entry, summary),
      this.options.kvCacheTypeOf?.(state.entry) ?? "f16",
    );
  }

  /** Roles known so far: the preset's, else the file's (unknown until downloaded: generation). */
  rolesOf(id: string): ModelRole[] {
    const state = this.require(id);
    return state.entry.roles ?? state.summary?.roles ?? ["generate", "embed"];
  }

  list(): ModelInfo[] {
    return [...this.states.values()].map((state) => this.info(state));
  }

  get(id: string): ModelInfo | undefined {
    const state = this.byName.get(id);
    return state && this.info(state);
  }

  private info(state: ModelState<B>): ModelInfo {
    return {
      id: state.entry.id,
      aliases: state.entry.aliases,
      status: state.status,
      ...(state.reason !== undefined && { reason: state.reason }),
      roles: this.rolesOf(state.entry.id),
      architecture: state.summary?.architecture ?? null,
      sizeBytes: state.summary?.fileBytes ?? null,
      memoryBytes: state.summary ? this.estimate(state, state.summary) : null,
      adapters: (state.entry.settings.lora ?? []).map((adapter, id) => ({ id, ...adapter })),
      loraAliases: Object.entries(state.entry.loraAliases ?? {}).map(([name, lora]) => ({ name, lora })),
      reference: state.entry.reference,
      inUse: state.inUse,
      loads: state.loads,
      default: state.entry.id === this.options.defaultId,
      file: state.pinned
        ? null
        : (state.file ??
          (isRemoteModelReference(state.entry.reference) ? null : path.resolve(state.entry.reference))),
      expiresAt: state.backend ? this.expiryOf(state) : null,
    };
  }

  /** The idle timer's end (armed when the last request released the model at `lastUsed`). */
  private expiryOf(state: ModelState<B>): number | null {
    if (state.pinned || state.keepAliveMs < 0) return null;
    const idleFrom = state.inUse > 0 ? performance.now() : state.lastUsed;
    return Date.now() + Math.max(0, idleFrom + state.keepAliveMs - performance.now());
  }

  /** The backend when loaded (no lease; for health and metrics). */
  loadedBackend(id: string): B | undefined {
    return this.states.get(id)?.backend;
  }

  loadedBackends(): Array<[string, B]> {
    return [...this.states.values()].flatMap((state) =>
      state.backend ? [[state.entry.id, state.backend] as [string, B]] : [],
    );
  }

  /**
   * Holds model `id` for a request, loading it first when needed. Throws an ApiError 503 saying why
   * when the model cannot be loaded, or 400 when it cannot serve `role`.
   */
  async acquire(id: string, role: ModelRole): Promise<Lease<B>> {
    const state = this.require(id);
    const roles = this.rolesOf(id);
    if (!roles.includes(role)) throw new ModelRoleError(id, role, roles);
    state.inUse++;
    clearTimeout(state.idleTimer);
    let backend: B;
    try {
      backend = await this.ensureLoaded(state);
    } catch (error) {
      state.inUse--;
      throw error;
    }
    const finalRoles = this.rolesOf(id);
    if (!finalRoles.includes(role)) {
      state.inUse--;
      this.settle(state);
      throw new ModelRoleError(id, role, finalRoles);
    }
    let released = false;
    return {
      id,
      backend,
      release: (keepAliveMs) => {
        if (released) return;
        released = true;
        state.inUse--;
        state.lastUsed = performance.now();
        if (keepAliveMs !== undefined) state.keepAliveMs = longerStay(state.keepAliveMs, keepAliveMs);
        this.settle(state);
      },
    };
  }

  /** Loads `id` (POST /models/load); resolves once loaded, throws with the reason when it fails. */
  async load(id: string): Promise<void> {
    const state = this.require(id);
    state.inUse++;
    try {
      await this.ensureLoaded(state, true);
    } finally {
      state.inUse--;
      state.lastUsed = performance.now();
      this.settle(state);
    }
  }

  /** Unloads `id` now, after its running requests; false when it was not loaded. */
  async unload(id: string): Promise<boolean> {
    const state = this.require(id);
    if (state.loading) await state.loading.catch(() => undefined);
    if (!state.backend) return false;
    if (state.inUse > 0) {
      // Unloaded as soon as its last request releases it.
      state.keepAliveMs = 0;
      return true;
    }
    await this.unloadNow(state);
    return true;
  }

  async close(): Promise<void> {
    this.closed = true;
    const closing: Promise<void>[] = [];
    for (const state of this.states.values()) {
      clearTimeout(state.idleTimer);
      closing.push(
        (async () => {
          await state.loading?.catch(() => undefined);
          await state.unloading;
          if (state.backend) await this.unloadNow(state);
        })(),
      );
    }
    await Promise.all(closing);
  }

  private require(id: string): ModelState<B> {
    const state = this.byName.get(id);
    if (!state) throw new ModelNotFoundError(id, this.knownNames());
    return state;
  }

  private ensureLoaded(state: ModelState<B>, retryFailed = false): Promise<B> {
    if (state.backend) return Promise.resolve(state.backend);
    if (state.loading) return state.loading;
    if (state.status === "failed" && !retryFailed && !this.fileChanged(state))
      return Promise.reject(failedError(state.entry.id, state.reason ?? "unknown"));
    state.status = "loading";
    state.loads++;
    delete state.reason;
    const loading = this.loadBackend(state);
    state.loading = loading;
    loading.then(
      (backend) => {
        state.loading = undefined;
        if (this.closed) {
          void backend.close();
          return;
        }
        state.backend = backend;
        state.status = "loaded";
        state.lastUsed = performance.now();
        this.enforceLimits(state);
      },
      (error: unknown) => {
        state.loading = undefined;
        this.fail(state, error, state.file ?? state.entry.reference);
      },
    );
    return loading.catch((error: unknown) => {
      throw failedError(state.entry.id, describe(error));
    });
  }

  private async loadBackend(state: ModelState<B>): Promise<B> {
    await state.unloading;
    const file = await this.options.resolveFile(state.entry);
    state.file = file;
    state.summary = await inspectGguf(file);
    this.enforceLimits(state, this.estimate(state, state.summary));
    const started = performance.now();
    const backend = await this.options.createBackend(state.entry, file, state.summary);
    this.options.log?.(`model "${state.entry.id}" loaded in ${Math.round(performance.now() - started)} ms`);
    return backend;
  }

  private fail(state: ModelState<B>, error: unknown, file: string): void {
    state.status = "failed";
    state.reason = describe(error);
    state.failedFile = file;
    const info = statSync(file, { throwIfNoEntry: false });
    state.failedStamp = info ? `${info.size}:${info.mtimeMs}` : undefined;
    this.options.log?.(`model "${state.entry.id}" failed to load: ${state.reason}`);
  }

  private fileChanged(state: ModelState<B>): boolean {
    if (!state.failedFile) return true;
    const info = statSync(state.failedFile, { throwIfNoEntry: false });
    return (info ? `${info.size}:${info.mtimeMs}` : undefined) !== state.failedStamp;
  }

  /**
   * Unloads idle models, least recently used first, until `incoming` (loading, `extraBytes` more)
   * fits MODELS_MAX_LOADED and MODELS_MEMORY_BUDGET. Models in use stay: the limits are then
   * exceeded until they go idle (settle calls this again).
   */
  private enforceLimits(incoming?: ModelState<B>, extraBytes = 0): void {
    const { maxLoaded, memoryBudget } = this.options;
    const resident = () =>
      [...this.states.values()].filter((s) => s !== incoming && !s.pinned && (s.backend || s.loading));
    const bytes = (s: ModelState<B>) => (s.summary ? this.estimate(s, s.summary) : 0);
    const over = () => {
      const others = resident();
      const count = others.length + (incoming ? 1 : 0);
      const memory =
        others.reduce((sum, s) => sum + bytes(s), 0) + (incoming?.backend ? bytes(incoming) : extraBytes);
      return (maxLoaded > 0 && count > maxLoaded) || (memoryBudget > 0 && memory > memoryBudget);
    };
    const idle = resident()
      .filter((s) => s.backend && s.inUse === 0)
      .sort((a, b) => a.lastUsed - b.lastUsed);
    while (over() && idle.length > 0) {
      const victim = idle.shift()!;
      this.options.log?.(
        `model "${victim.entry.id}" unloaded: least recently used, to stay within the limits`,
      );
      void this.unloadNow(victim);
    }
  }

  /** After a request: unload now (keep_alive 0), or arm the idle timer, and recheck the limits. */
  private settle(state: ModelState<B>): void {
    if (state.inUse > 0 || !state.backend || state.pinned) {
      this.enforceLimits();
      return;
    }
    clearTimeout(state.idleTimer);
    if (state.keepAliveMs === 0) void this.unloadNow(state);
    else if (state.keepAliveMs > 0) {
      state.idleTimer = setTimeout(() => {
        if (state.inUse === 0 && state.backend) void this.unloadNow(state);
      }, state.keepAliveMs);
      state.idleTimer.unref();
    }
    this.enforceLimits();
  }

  /** Marks the model unloaded at once and frees it in the background (a new load waits for that). */
  private unloadNow(state: ModelState<B>): Promise<void> {
    const backend = state.backend;
    if (!backend || state.pinned) return state.unloading ?? Promise.resolve();
    state.backend = undefined;
    state.status = "unloaded";
    clearTimeout(state.idleTimer);
    // A request's keep_alive lasts until the unload; the next load starts from the default again.
    state.keepAliveMs = state.entry.id === this.options.defaultId ? -1 : this.options.defaultKeepAliveMs;
    const previous = state.unloading ?? Promise.resolve();
    const unloading = previous
      .then(() => backend.close())
      .catch((error: unknown) => {
        this.options.log?.(`model "${state.entry.id}" did not unload cleanly: ${describe(error)}`);
      });
    state.unloading = unloading;
    void unloading.then(() => {
      if (state.unloading === unloading) state.unloading = undefined;
    });
    return unloading;
  }
}

/** Every name a model is asked for by: its id, its aliases and its LoRA aliases. */
function namesOf(entry: ModelEntry): string[] {
  return [entry.id, ...entry.aliases, ...Object.keys(entry.loraAliases ?? {})];
}

function describe(error: unknown): string {
  if (error instanceof ApiError || error instanceof DomainError) return error.message;
  if (error instanceof ModelFileError) return error.message;
  return error instanceof Error ? error.message : String(error);
}

function failedError(id: string, reason: string): DomainError {
  return notReady(`The model "${id}" failed to load: ${reason}`, "model_not_ready");
}

/**
 * The keep-alive a model gets after a request asking for `requested`: 0 unloads it (only model
 * administrators may send it: textgen/http/model-access.ts); any other value only lengthens its stay
 * (-1: for ever), so one client's short keep_alive never unloads a model others keep (issue #35). To
 * unload sooner, send 0 or POST /models/unload.
 */
export function longerStay(current: number, requested: number): number {
  if (requested === 0) return 0;
  if (current < 0 || requested < 0) return -1;
  return Math.max(current, requested);
}

/** The longest delay a Node timer takes (2^31 − 1 ms, ~24.8 days); a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Ollama's keep_alive: a duration ("5m", "1h30m", "500ms"), seconds as a number, 0 or negative; in
 * ms, -1 for ever. Longer than a timer can wait counts as for ever (as Ollama clamps an overflowing
 * one): `1e10` seconds once became a 1 ms timer and unloaded the model at once.
 */
export function parseKeepAlive(value: string | number): number {
  const ms = parseKeepAliveMs(value);
  return ms < 0 || ms > MAX_TIMER_MS ? -1 : ms;
}

function parseKeepAliveMs(value: string | number): number {
  if (typeof value === "number") {
    if (Number.isNaN(value)) throw new Error(`${value} is not a duration`);
    return value < 0 ? -1 : Math.round(value * 1000);
  }
  const text = value.trim();
  if (/^-?\d+(\.\d+)?$/.test(text)) return parseKeepAliveMs(Number(text));
  if (text.startsWith("-")) return -1;
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  let rest = text;
  while (rest !== "") {
    const part = /^(\d+(?:\.\d+)?)(ms|s|m|h)/.exec(rest);
    if (!part) throw new Error(`"${value}" is not a duration such as 30s, 5m, 1h, 0 or -1`);
    total += Number(part[1]) * units[part[2]!]!;
    rest = rest.slice(part[0].length);
  }
  return Math.round(total);
}
