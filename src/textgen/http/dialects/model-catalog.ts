/**
 * The models the Ollama routes list, show, pull and delete, read from the model registry (the one
 * list of models every API serves): `/api/tags` lists each registry model whose file is here,
 * `/api/ps` the loaded ones with their keep-alive's end, `/api/pull` downloads into MODELS_DIR (through
 * engine/model-pull.ts's checks) and serves the file at once, `/api/delete` removes a file of
 * MODELS_DIR that is not being served.
 */
import { createHash } from "node:crypto";
import { stat, unlink } from "node:fs/promises";
import path from "node:path";
import { readGgufFileInfo, resolveModelFile } from "node-llama-cpp";
import { conflict, notFound } from "../../../core/errors.js";
import { isRemoteModelReference } from "../../../core/config.js";
import { KeyedMutex } from "../../../core/keyed-mutex.js";
import { planPull, pullModel, type PullPolicy } from "../../engine/model-pull.js";
import type { ModelRole } from "../../engine/gguf-check.js";
import type { ModelInfo } from "../../engine/model-registry.js";
import { modelIdOf } from "../../engine/presets.js";
import type { TextgenService } from "../../engine/service.js";

export interface CatalogModel {
  /** What clients call it (`model` in requests). */
  name: string;
  /** The registry's id (what the registry is asked for). */
  id: string;
  file: string;
  size: number;
  modifiedAt: Date;
  /** Stands for the file: SHA-256 of its path, size and time (hashing gigabytes would take minutes). */
  digest: string;
  /** Whether it is in memory, serving. */
  loaded: boolean;
  /** Estimated memory when loaded (weights + KV cache); the file's size when unknown. */
  memoryBytes: number;
  /** When a loaded model's keep-alive ends; null: never. */
  expiresAt: Date | null;
  roles: ModelRole[];
}

export interface ModelDetails {
  architecture: string;
  contextLength?: number;
  parameterSize: string;
  quantization: string;
  chatTemplate?: string;
  /** Raw GGUF metadata, flattened (`llama.context_length` …), arrays left out. */
  info: Record<string, string | number | boolean>;
}

export interface PullProgress {
  completed: number;
  total: number;
}

export interface ModelCatalog {
  /** Every model that can be served: loaded or on disk. */
  list(): Promise<CatalogModel[]>;
  /** The models in memory now. */
  loaded(): Promise<CatalogModel[]>;
  /** One model by name, or a 404. */
  find(name: string): Promise<CatalogModel>;
  details(model: CatalogModel): Promise<ModelDetails>;
  /**
   * Downloads an `hf:` reference or https URL into MODELS_DIR (nothing when it is already there),
   * under MODELS_PULL_HOSTS, MODELS_PULL_MAX_BYTES and MODELS_PULL_TIMEOUT_MS (engine/model-pull.ts).
   */
  pull(
    reference: string,
    onProgress: (progress: PullProgress) => void,
    signal: AbortSignal,
  ): Promise<CatalogModel>;
  /** Deletes a downloaded model's file; the served model is a 409. */
  remove(name: string): Promise<void>;
}

const digestOf = (file: string, size: number, modified: Date) =>
  createHash("sha256").update(`${file}\0${size}\0${modified.getTime()}`).digest("hex");

export class RegistryCatalog implements ModelCatalog {
  /** One download per file at a time: a second pull of it waits, then finds the file there. */
  private readonly pulls = new KeyedMutex();

  constructor(
    private readonly service: TextgenService,
    private readonly modelsDir: string,
    private readonly pullPolicy: PullPolicy,
  ) {}

  /** The local file of a registry model: known, or a reference already downloaded (no network). */
  private async fileOf(info: ModelInfo): Promise<string | undefined> {
    if (info.file !== null) return info.file;
    if (!isRemoteModelReference(info.reference)) return undefined;
    return resolveModelFile(info.reference, { directory: this.modelsDir, download: false, cli: false }).catch(
      () => undefined,
    );
  }

  private async entry(info: ModelInfo): Promise<CatalogModel | undefined> {
    const file = await this.fileOf(info);
    const stats = file === undefined ? undefined : await stat(file).catch(() => undefined);
    if (file === undefined || !stats?.isFile()) return undefined;
    return {
      name: this.service.nameOf(info.id),
      id: info.id,
      file,
      size: stats.size,
      modifiedAt: stats.mtime,
      digest: digestOf(file, stats.size, stats.mtime),
      loaded: info.status === "loaded",
      memoryBytes: info.memoryBytes ?? stats.size,
      expiresAt: info.expiresAt === null ? null : new Date(info.expiresAt),
      roles: info.roles,
    };
  }

  async list(): Promise<CatalogModel[]> {
    const models = await Promise.all(this.service.models.list().map((info) => this.entry(info)));
    return models.filter((model) => model !== undefined);
  }

  async loaded(): Promise<CatalogModel[]> {
    return (await this.list()).filter((model) => model.loaded);
  }

  async find(name: string): Promise<CatalogModel> {
    const wanted = name.replace(/:latest$/, "");
    const id = this.service.models.find(wanted)?.id;
    const model = (await this.list()).find((candidate) => candidate.name === wanted || candidate.id === id);
    if (!model) throw notFound(`model '${name}' not found`);
    return model;
  }

  async details(model: CatalogModel): Promise<ModelDetails> {
    // A file llama.cpp cannot read (a failed model, listed with its reason in /v1/models) has none.
    const metadata = await readGgufFileInfo(model.file, { readTensorInfo: false }).then(
      (read) => read.metadata,
      () => ({}),
    );
    const info: Record<string, string | number | boolean> = {};
    const flatten = (value: unknown, prefix: string) => {
      if (Array.isArray(value) || value === null || value === undefined) return;
      if (typeof value === "object")
        for (const [key, inner] of Object.entries(value)) flatten(inner, prefix ? `${prefix}.${key}` : key);
      else if (typeof value === "string" || typeof value === "number" || typeof value === "boolean")
        info[prefix] = value;
    };
    flatten(metadata, "");
    const architecture = String(info["general.architecture"] ?? "unknown");
    const contextLength = info[`${architecture}.context_length`];
    const template = info["tokenizer.chat_template"];
    delete info["tokenizer.chat_template"];
    return {
      architecture,
      contextLength: typeof contextLength === "number" ? contextLength : undefined,
      parameterSize: String(info["general.size_label"] ?? ""),
      quantization: String(info["general.file_type"] ?? ""),
      chatTemplate: typeof template === "string" ? template : undefined,
      info,
    };
  }

  async pull(
    reference: string,
    onProgress: (progress: PullProgress) => void,
    signal: AbortSignal,
  ): Promise<CatalogModel> {
    const plan = planPull(reference);
    const file = await this.pulls.run(plan.fileName, () =>
      pullModel(plan, this.modelsDir, this.pullPolicy, { onProgress, signal }),
    );
    // Served from now on under its file's name, unless the registry already serves it (a preset's reference).
    const known = this.service.models.list().find((info) => info.reference === reference);
    const id =
      known?.id ??
      (await this.service.models.add({ id: modelIdOf(file), aliases: [], reference: file, settings: {} }));
    const model = await this.entry(this.service.models.get(id)!);
    if (!model) throw new Error(`the download of ${reference} left no file`);
    return model;
  }

  async remove(name: string): Promise<void> {
    const model = await this.find(name);
    const inside = path.relative(path.resolve(this.modelsDir), model.file);
    if (inside.startsWith("..") || path.isAbsolute(inside))
      throw conflict(
        `model '${name}' is not in MODELS_DIR (${model.file}); only the models there can be deleted`,
      );
    this.service.models.remove(model.id);
    await unlink(model.file);
  }
}
