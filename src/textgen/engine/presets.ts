/**
 * The model catalogue: MODEL_PATH (the default model), EMBEDDING_MODEL_PATH, every `.gguf` under
 * MODELS_DIR (named by its file name without `.gguf`), and MODELS_PRESETS, a JSON or INI file in the
 * shape of llama-server's `--models-preset`: one section per model, `[*]` for every model.
 *
 *   [*]
 *   threads = 2
 *   [bge-small]
 *   model = /models/bge-small-en-v1.5-q8_0.gguf
 *   alias = embed, bge
 *   role = embed
 *   ctx-size = 512
 *
 * JSON is the same as an object: `{"*": {...}, "bge-small": {"model": "...", "alias": ["embed"]}}`.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { ConfigError, isRemoteModelReference, type Config } from "../../core/config.js";
import type { ModelRole } from "./gguf-check.js";

export interface ModelSettings {
  contextSize?: number;
  threads?: number;
  /** Parallel sequences (MAX_CONCURRENT for this model). */
  parallel?: number;
  gpu?: "auto" | false;
}

export interface ModelEntry {
  id: string;
  aliases: string[];
  /** A local path, an `hf:` reference or a URL (fetched into MODELS_DIR on first load). */
  reference: string;
  /** Set by the preset; otherwise read from the file's metadata. */
  roles?: ModelRole[];
  settings: ModelSettings;
}

const ROLE_NAMES: Record<string, ModelRole[]> = {
  generate: ["generate", "embed"],
  generation: ["generate", "embed"],
  chat: ["generate", "embed"],
  embed: ["embed"],
  embedding: ["embed"],
  embeddings: ["embed"],
  rerank: ["rerank"],
  reranking: ["rerank"],
};

/** Preset keys: ours and llama-server's long and short spellings. */
const KEYS: Record<string, "model" | "alias" | "role" | "ctx" | "threads" | "parallel" | "ngl"> = {
  model: "model",
  m: "model",
  alias: "alias",
  aliases: "alias",
  a: "alias",
  role: "role",
  "ctx-size": "ctx",
  c: "ctx",
  threads: "threads",
  t: "threads",
  parallel: "parallel",
  np: "parallel",
  "n-gpu-layers": "ngl",
  ngl: "ngl",
  "gpu-layers": "ngl",
};

type Section = Record<string, string | number | boolean | string[]>;

/** The name a file is served under: its file name without `.gguf`. */
export function modelIdOf(reference: string): string {
  return path.basename(reference).replace(/\.gguf$/i, "");
}

export function parsePresets(text: string, source: string): Record<string, Section> {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch (error) {
      throw new ConfigError(`MODELS_PRESETS ${source} is not valid JSON: ${(error as Error).message}`);
    }
    const sections = parsed as Record<string, unknown>;
    for (const [name, value] of Object.entries(sections))
      if (typeof value !== "object" || value === null || Array.isArray(value))
        throw new ConfigError(`MODELS_PRESETS ${source}: "${name}" must be an object of settings`);
    return sections as Record<string, Section>;
  }
  const sections: Record<string, Section> = {};
  let current: Section | undefined;
  for (const [index, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith(";") || line.startsWith("#")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = sections[header[1]!.trim()] ??= {};
      continue;
    }
    const pair = /^([^=]+)=(.*)$/.exec(line);
    if (!pair) throw new ConfigError(`MODELS_PRESETS ${source} line ${index + 1}: expected "key = value"`);
    const key = pair[1]!.trim();
    // Keys before the first section are file-level (llama-server's `version = 1`).
    if (!current) continue;
    current[key] = pair[2]!.trim().replace(/^"(.*)"$/, "$1");
  }
  return sections;
}

function positive(value: unknown, key: string, name: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0)
    throw new ConfigError(`MODELS_PRESETS [${name}] ${key} must be a whole number, got "${String(value)}"`);
  return number;
}

/** Applies one preset section to an entry. */
function applySection(entry: ModelEntry, section: Section, name: string, baseDir: string): void {
  for (const [rawKey, value] of Object.entries(section)) {
    const key = KEYS[rawKey.replace(/^-+/, "").toLowerCase()];
    if (key === undefined)
      throw new ConfigError(
        `MODELS_PRESETS [${name}]: unknown setting "${rawKey}" (known: model, alias, role, ctx-size, threads, parallel, n-gpu-layers)`,
      );
    if (key === "model") {
      const reference = String(value);
      entry.reference = isRemoteModelReference(reference) ? reference : path.resolve(baseDir, reference);
    } else if (key === "alias") {
      const list = Array.isArray(value) ? value.map(String) : String(value).split(",");
      entry.aliases.push(...list.map((alias) => alias.trim()).filter((alias) => alias !== ""));
    } else if (key === "role") {
      const roles = ROLE_NAMES[String(value).toLowerCase()];
      if (!roles)
        throw new ConfigError(
          `MODELS_PRESETS [${name}] role must be generate, embed or rerank, got "${String(value)}"`,
        );
      entry.roles = roles;
    } else if (key === "ctx") entry.settings.contextSize = positive(value, rawKey, name) || undefined;
    else if (key === "threads") entry.settings.threads = positive(value, rawKey, name) || undefined;
    else if (key === "parallel") entry.settings.parallel = positive(value, rawKey, name) || undefined;
    else entry.settings.gpu = positive(value, rawKey, name) === 0 ? false : "auto";
  }
}

export interface CatalogueSources {
  modelPath: string;
  embeddingModelPath: string | null;
  modelsDir: string;
  presetsFile: string | null;
  /** Whether MODEL_PATH is served by a remote upstream rather than loaded here. */
  remoteDefault?: boolean;
}

export interface Catalogue {
  entries: ModelEntry[];
  defaultId: string;
  embeddingId: string | null;
  /** More than the default (and embedding) model: unknown names are refused instead of served. */
  multiModel: boolean;
}

/** Where the model catalogue comes from: MODEL_PATH, EMBEDDING_MODEL_PATH, MODELS_DIR, MODELS_PRESETS. */
export function catalogueSources(config: Config): CatalogueSources {
  return {
    modelPath: config.textgen.modelPath,
    embeddingModelPath: config.models.embeddingModelPath,
    modelsDir: config.models.modelsDir,
    presetsFile: config.models.modelsPresets,
  };
}

/** Every model the server can serve, the default first. */
export function buildCatalogue(sources: CatalogueSources): Catalogue {
  const entries: ModelEntry[] = [];
  const byId = new Map<string, ModelEntry>();
  const add = (reference: string, id = modelIdOf(reference)): ModelEntry => {
    const existing = byId.get(id);
    if (existing) return existing;
    const entry: ModelEntry = { id, aliases: [], reference, settings: {} };
    entries.push(entry);
    byId.set(id, entry);
    return entry;
  };
  const defaultEntry = add(sources.modelPath);
  const embeddingEntry = sources.embeddingModelPath ? add(sources.embeddingModelPath) : undefined;
  if (embeddingEntry && embeddingEntry !== defaultEntry) embeddingEntry.roles = ["embed"];
  const fixed = entries.length;
  const defaultFile = isRemoteModelReference(sources.modelPath) ? null : path.resolve(sources.modelPath);
  const defaultBase = path.basename(sources.modelPath).toLowerCase();
  for (const file of scanGgufFiles(sources.modelsDir)) {
    // MODEL_PATH's own file, or its download (node-llama-cpp names it after the reference).
    if (file === defaultFile || file.toLowerCase().endsWith(defaultBase)) continue;
    if (sources.embeddingModelPath && path.resolve(sources.embeddingModelPath) === file) continue;
    add(file);
  }
  if (sources.presetsFile) {
    const sections = parsePresets(readFileSync(sources.presetsFile, "utf8"), sources.presetsFile);
    const baseDir = path.dirname(path.resolve(sources.presetsFile));
    const global = sections["*"];
    for (const [name, section] of Object.entries(sections)) {
      if (name === "*") continue;
      const entry = byId.get(name) ?? add(String(section.model ?? section.m ?? name), name);
      if (global) applySection(entry, global, "*", baseDir);
      applySection(entry, section, name, baseDir);
    }
    if (global)
      for (const entry of entries) if (!(entry.id in sections)) applySection(entry, global, "*", baseDir);
  }
  const names = new Set<string>();
  for (const entry of entries)
    for (const name of [entry.id, ...entry.aliases]) {
      if (names.has(name)) throw new ConfigError(`MODELS_PRESETS: the name "${name}" is given to two models`);
      names.add(name);
    }
  return {
    entries,
    defaultId: defaultEntry.id,
    embeddingId: embeddingEntry?.id ?? null,
    multiModel: entries.length > fixed || sources.presetsFile !== null,
  };
}

/** `.gguf` files directly in `dir` or one folder down (none when it does not exist). */
function scanGgufFiles(dir: string): string[] {
  const found: string[] = [];
  const visit = (folder: string, depth: number) => {
    let names: string[];
    try {
      names = readdirSync(folder).sort();
    } catch {
      return;
    }
    for (const name of names) {
      const file = path.join(folder, name);
      const info = statSync(file, { throwIfNoEntry: false });
      if (!info) continue;
      if (info.isDirectory() && depth === 0) visit(file, 1);
      else if (info.isFile() && name.toLowerCase().endsWith(".gguf")) found.push(file);
    }
  };
  visit(path.resolve(dir), 0);
  return found;
}
