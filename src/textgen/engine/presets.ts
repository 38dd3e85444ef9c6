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
 *
 * Engine settings (#36): `draft` (a draft model for speculative decoding; also `model-draft`, `md`),
 * `speculative` (auto | draft | ngram | off), `draft-max`, `cache-type-k` / `cache-type-v` /
 * `kv-cache-type` (f16 | q8_0 | q4_0, one type for both), `lora` (adapters: `file[:scale], …`, ids in
 * that order, applied at their scale unless `lora-init-without-apply = true`). A section with
 * `base = <model>` is not a model of its own but a name for the base model with adapters:
 *
 *   [stories-tuned]
 *   base = stories
 *   lora = adapters/tuned.gguf:0.8     ; a base adapter by id, file name or path, with its scale
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { ConfigError, isRemoteModelReference, type Config } from "../../core/config.js";
import { parseConfigJson } from "../../core/errors.js";
import type { ModelRole } from "./gguf-check.js";

export type KvCacheType = "f16" | "q8_0" | "q4_0";
export type SpeculativeMode = "auto" | "draft" | "ngram" | "off";

export interface LoraAdapterSpec {
  /** Absolute path of the adapter's GGUF. */
  path: string;
  /** The scale every request gets unless it names its own (`lora`), 0 when loaded without applying. */
  scale: number;
}

/** A request's adapter scales, llama.cpp server's `lora: [{id, scale}]` (ids index the model's adapters). */
export type LoraSelection = { id: number; scale: number }[];

export interface ModelSettings {
  contextSize?: number;
  threads?: number;
  /** Parallel sequences (MAX_CONCURRENT for this model). */
  parallel?: number;
  gpu?: "auto" | false;
  /** A draft model (path or reference) for speculative decoding. */
  draft?: string;
  speculative?: SpeculativeMode;
  speculativeMaxTokens?: number;
  kvCacheType?: KvCacheType;
  /** LoRA adapters loaded with the model; their ids are their indexes. */
  lora?: LoraAdapterSpec[];
}

export interface ModelEntry {
  id: string;
  aliases: string[];
  /** A local path, an `hf:` reference or a URL (fetched into MODELS_DIR on first load). */
  reference: string;
  /** Set by the preset; otherwise read from the file's metadata. */
  roles?: ModelRole[];
  settings: ModelSettings;
  /** Names that serve this model with adapters (preset sections with `base`): name → scales. */
  loraAliases?: Record<string, LoraSelection>;
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

type Key =
  | "model"
  | "alias"
  | "role"
  | "ctx"
  | "threads"
  | "parallel"
  | "ngl"
  | "draft"
  | "speculative"
  | "draftMax"
  | "kv"
  | "lora"
  | "loraWithoutApply"
  | "base";

/** Preset keys: ours and llama-server's long and short spellings. */
const KEYS: Record<string, Key> = {
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
  draft: "draft",
  "model-draft": "draft",
  md: "draft",
  speculative: "speculative",
  "draft-max": "draftMax",
  "draft-n": "draftMax",
  "kv-cache-type": "kv",
  "cache-type-k": "kv",
  "cache-type-v": "kv",
  ctk: "kv",
  ctv: "kv",
  lora: "lora",
  "lora-scaled": "lora",
  "lora-init-without-apply": "loraWithoutApply",
  base: "base",
};

const KV_TYPES: readonly KvCacheType[] = ["f16", "q8_0", "q4_0"];
const SPECULATIVE_MODES: readonly SpeculativeMode[] = ["auto", "draft", "ngram", "off"];

/** `file[:scale], …` (a list in JSON presets), each scale 1 by default. */
function loraList(value: unknown, name: string): { ref: string; scale: number | undefined }[] {
  const items = Array.isArray(value) ? value.map(String) : String(value).split(",");
  return items
    .map((item) => item.trim())
    .filter((item) => item !== "")
    .map((item) => {
      const match = /^(.*?)(?::\s*(-?\d+(?:\.\d+)?))?$/.exec(item)!;
      const scale = match[2] === undefined ? undefined : Number(match[2]);
      if (scale !== undefined && !Number.isFinite(scale))
        throw new ConfigError(`MODELS_PRESETS [${name}] lora: bad scale in "${item}"`);
      return { ref: match[1]!.trim(), scale };
    });
}

type Section = Record<string, string | number | boolean | string[]>;

/** The name a file is served under: its file name without `.gguf`. */
export function modelIdOf(reference: string): string {
  return path.basename(reference).replace(/\.gguf$/i, "");
}

export function parsePresets(text: string, source: string): Record<string, Section> {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    const sections = parseConfigJson(trimmed, `MODELS_PRESETS ${source}`) as Record<string, unknown>;
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
        `MODELS_PRESETS [${name}]: unknown setting "${rawKey}" (known: model, alias, role, ctx-size, threads, parallel, n-gpu-layers, draft, speculative, draft-max, cache-type-k, cache-type-v, lora, lora-init-without-apply, base)`,
      );
    if (key === "base") continue;
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
    else if (key === "ngl") entry.settings.gpu = positive(value, rawKey, name) === 0 ? false : "auto";
    else applyEngineSetting(entry, key, rawKey, value, name, baseDir);
  }
}

/** The #36 settings: draft model, speculation, KV type, LoRA adapters. */
function applyEngineSetting(
  entry: ModelEntry,
  key: Key,
  rawKey: string,
  value: unknown,
  name: string,
  baseDir: string,
): void {
  const text = String(value).trim();
  if (key === "draft")
    entry.settings.draft = isRemoteModelReference(text) ? text : path.resolve(baseDir, text);
  else if (key === "speculative") {
    if (!(SPECULATIVE_MODES as readonly string[]).includes(text))
      throw new ConfigError(
        `MODELS_PRESETS [${name}] speculative must be auto, draft, ngram or off, got "${text}"`,
      );
    entry.settings.speculative = text as SpeculativeMode;
  } else if (key === "draftMax")
    entry.settings.speculativeMaxTokens = positive(value, rawKey, name) || undefined;
  else if (key === "kv") {
    const type = text.toLowerCase();
    if (!(KV_TYPES as readonly string[]).includes(type))
      throw new ConfigError(`MODELS_PRESETS [${name}] ${rawKey} must be f16, q8_0 or q4_0, got "${text}"`);
    if (
      entry.settings.kvCacheType !== undefined &&
      entry.settings.kvCacheType !== type &&
      rawKey.startsWith("c")
    )
      throw new ConfigError(
        `MODELS_PRESETS [${name}]: cache-type-k and cache-type-v differ; Lectern uses one type for both (kv-cache-type)`,
      );
    entry.settings.kvCacheType = type as KvCacheType;
  } else if (key === "lora") {
    const adapters = (entry.settings.lora ??= []);
    for (const { ref, scale } of loraList(value, name))
      adapters.push({ path: path.resolve(baseDir, ref), scale: scale ?? 1 });
  } else if (key === "loraWithoutApply") {
    if (/^(1|true|yes|on)$/i.test(text)) for (const adapter of entry.settings.lora ?? []) adapter.scale = 0;
  }
}

/**
 * A `base` section: its names serve the base model with the adapters it lists (by id, file name or
 * path; a path the base does not load yet is added to it, not applied to the base's own requests).
 */
function applyLoraAlias(
  name: string,
  section: Section,
  byName: (name: string) => ModelEntry | undefined,
  baseDir: string,
): void {
  const baseName = String(section.base).trim();
  const base = byName(baseName);
  if (!base) throw new ConfigError(`MODELS_PRESETS [${name}] base: no model is named "${baseName}"`);
  const adapters = (base.settings.lora ??= []);
  const selection: LoraSelection = [];
  for (const { ref, scale } of section.lora === undefined ? [] : loraList(section.lora, name)) {
    let id = /^\d+$/.test(ref) ? Number(ref) : adapters.findIndex((a) => modelIdOf(a.path) === ref);
    if (id < 0 || id >= adapters.length) {
      if (/^\d+$/.test(ref))
        throw new ConfigError(`MODELS_PRESETS [${name}] lora: the model "${base.id}" has no adapter ${ref}`);
      const file = path.resolve(baseDir, ref);
      id = adapters.findIndex((a) => a.path === file);
      if (id < 0) id = adapters.push({ path: file, scale: 0 }) - 1;
    }
    selection.push({ id, scale: scale ?? 1 });
  }
  if (selection.length === 0)
    throw new ConfigError(
      `MODELS_PRESETS [${name}]: a section with base needs lora (the adapters it applies)`,
    );
  const aliases = section.alias === undefined ? [] : loraList(section.alias, name).map((a) => a.ref);
  for (const alias of [name, ...aliases]) (base.loraAliases ??= {})[alias] = selection;
  for (const key of Object.keys(section))
    if (
      !["base", "lora", "lora-scaled", "alias", "aliases", "a"].includes(key.replace(/^-+/, "").toLowerCase())
    )
      throw new ConfigError(
        `MODELS_PRESETS [${name}]: a section with base takes only lora and alias, not "${key}"`,
      );
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
      if (name === "*" || section.base !== undefined) continue;
      const entry = byId.get(name) ?? add(String(section.model ?? section.m ?? name), name);
      if (global) applySection(entry, global, "*", baseDir);
      applySection(entry, section, name, baseDir);
    }
    if (global)
      for (const entry of entries) if (!(entry.id in sections)) applySection(entry, global, "*", baseDir);
    const byName = (name: string) => entries.find((e) => e.id === name || e.aliases.includes(name));
    for (const [name, section] of Object.entries(sections))
      if (name !== "*" && section.base !== undefined) applyLoraAlias(name, section, byName, baseDir);
  }
  const names = new Set<string>();
  for (const entry of entries)
    for (const name of [entry.id, ...entry.aliases, ...Object.keys(entry.loraAliases ?? {})]) {
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
