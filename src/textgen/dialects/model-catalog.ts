/**
 * The models the Ollama routes list, show, pull and delete. `ModelCatalog` is the interface those
 * routes need; `SingleModelCatalog` implements it for today's one served model plus the GGUF files
 * downloaded into MODELS_DIR. The model registry (many models, load/unload) implements the same
 * interface and replaces this one in app.ts.
 */
import { createHash } from "node:crypto";
import { readdir, stat, unlink } from "node:fs/promises";
import path from "node:path";
import { readGgufFileInfo, resolveModelFile } from "node-llama-cpp";
import { badRequest, conflict, notFound } from "../../core/errors.js";
import { isRemoteModelReference } from "../../core/config.js";
import type { Generator } from "../generator.js";

export interface CatalogModel {
  /** What clients call it (`model` in requests). */
  name: string;
  file: string;
  size: number;
  modifiedAt: Date;
  /** Stands for the file: SHA-256 of its path, size and time (hashing gigabytes would take minutes). */
  digest: string;
  /** Whether it is in memory, serving. */
  loaded: boolean;
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
  /** Downloads an `hf:` reference or URL into MODELS_DIR (nothing when it is already there). */
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

export class SingleModelCatalog implements ModelCatalog {
  constructor(
    private readonly generator: Generator,
    private readonly modelsDir: string,
  ) {}

  /** The served model's file, once loaded (local backends only). */
  private servedFile(): string | undefined {
    return (this.generator as { loadedFrom?: { modelPath: string } | null }).loadedFrom?.modelPath;
  }

  private async entry(file: string, name: string, loaded: boolean): Promise<CatalogModel | undefined> {
    const info = await stat(file).catch(() => undefined);
    if (!info?.isFile()) return undefined;
    return {
      name,
      file,
      size: info.size,
      modifiedAt: info.mtime,
      digest: digestOf(file, info.size, info.mtime),
      loaded,
    };
  }

  async loaded(): Promise<CatalogModel[]> {
    const file = this.servedFile();
    if (!file || this.generator.status().state !== "ready") return [];
    const served = await this.entry(file, this.generator.modelName, true);
    return served ? [served] : [];
  }

  async list(): Promise<CatalogModel[]> {
    const models = await this.loaded();
    const served = this.servedFile();
    const names = await readdir(this.modelsDir).catch(() => [] as string[]);
    for (const name of names.filter((entry) => entry.toLowerCase().endsWith(".gguf")).sort()) {
      const file = path.join(this.modelsDir, name);
      if (served && path.resolve(file) === path.resolve(served)) continue;
      const model = await this.entry(file, name.replace(/\.gguf$/i, ""), false);
      if (model) models.push(model);
    }
    return models;
  }

  async find(name: string): Promise<CatalogModel> {
    const wanted = name.replace(/:latest$/, "");
    const model = (await this.list()).find((candidate) => candidate.name === wanted);
    if (!model) throw notFound(`model '${name}' not found`);
    return model;
  }

  async details(model: CatalogModel): Promise<ModelDetails> {
    const { metadata } = await readGgufFileInfo(model.file, { readTensorInfo: false });
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
    if (!isRemoteModelReference(reference))
      throw badRequest(
        `"${reference}" is not a model reference this server can pull: give hf:<owner>/<repo>/<file>.gguf or an https URL`,
        [{ path: "/model" }],
      );
    const file = await resolveModelFile(reference, {
      directory: this.modelsDir,
      cli: false,
      signal,
      onProgress: ({ totalSize, downloadedSize }) =>
        onProgress({ completed: downloadedSize, total: totalSize }),
    });
    const model = await this.entry(file, path.basename(file).replace(/\.gguf$/i, ""), false);
    if (!model) throw new Error(`the download of ${reference} left no file`);
    return model;
  }

  async remove(name: string): Promise<void> {
    const model = await this.find(name);
    if (model.loaded) throw conflict(`model '${name}' is being served; it cannot be deleted`);
    await unlink(model.file);
  }
}
