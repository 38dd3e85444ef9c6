/**
 * The `lectern` command line. Index commands work directly on the same store the RAG app uses
 * (DATA_DIR, or DATABASE_URL), so they need no running server. `models`, `generate` and `ask` ask the
 * running apps when they answer (LECTERN_URL, LECTERN_RAG_URL: server-client.ts), and otherwise work
 * in process (`--local` always does).
 *
 * Exit codes: 0 done, 1 failed, 2 bad usage, 3 not found, 4 refused input, 78 bad configuration.
 */
import { createHash } from "node:crypto";
import { readdir, readFile, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { parseArgs, type ParseArgsConfig } from "node:util";
import type * as CliProgress from "cli-progress";
import type { Config } from "../core/config.js";
import { loadConfigOrReport } from "./load-config.js";
import { badRequest, DomainError, notFound, notReady, type ErrorKind } from "../core/errors.js";
import type { RagService, DocumentInput } from "../rag/service.js";
import type { IndexSettings } from "../rag/store/types.js";
import { SCORER_NAMES } from "../rag/search/scoring.js";
import { NAME_PATTERN } from "../core/validation.js";
import {
  CHUNK_SIZE_RANGE,
  DEFAULT_CHUNK_SIZE,
  DEFAULT_SCORER,
  resolveIndexSettings,
} from "../rag/service/settings.js";
import type { Which } from "../server.js";
import type { AskInput } from "../rag/answering/ask.js";
import { onTextDeltas } from "../textgen/engine/events.js";
import type { LlamaGenerator } from "../textgen/engine/llama-generator.js";
import { findApp, getJson, postJson, postStream } from "./server-client.js";

// Each command loads only what it needs (llama.cpp, the stores, the document parsers are heavy), so
// quick commands such as `index list` or `--help` start fast.
const loaders = () => import("../rag/ingest/loaders.js");

const EXIT = { ok: 0, failed: 1, usage: 2, notFound: 3, refused: 4, config: 78 } as const;
/** The domain errors that refuse the input (exit 4); the others, not found aside, are failures (exit 1). */
const REFUSED: ReadonlySet<ErrorKind> = new Set(["invalid", "conflict", "too_large", "busy", "cancelled"]);

class UsageError extends Error {}
/** A command that does not exist: its own --help does not exist either. */
class UnknownCommandError extends UsageError {}

const SCORER_OPTION = `--scorer ${SCORER_NAMES.join("|")}`.padEnd(31);
const CHUNK_SIZES = `${CHUNK_SIZE_RANGE.minimum} … ${CHUNK_SIZE_RANGE.maximum}, default ${DEFAULT_CHUNK_SIZE}`;

const HELP: Record<string, string> = {
  main: `lectern: self-hosted text generation and document question answering

Usage: lectern <command> [options]

Commands:
  serve [textgen|rag|all]            start the HTTP apps (default: all)
  index build <name> <path…>         index files and folders (the formats /rag/build reads)
  index list                         list indices
  index rm <name>                    delete an index
  index sync <name> <dir> [--watch]  apply only what changed in a folder since the last sync
  ask <index> "<question>"           answer a question from an index, with sources
  generate "<prompt>"                generate text with the model
  model pull <hf:owner/repo/file>    download a model into MODELS_DIR
  models                             list the models served: role, architecture, size, status
  mcp                                an MCP server over stdio, for desktop clients (the store here)

models, generate and ask ask the running apps when they answer (LECTERN_URL, default
http://127.0.0.1:8000; LECTERN_RAG_URL, default http://127.0.0.1:8001; LECTERN_API_KEY when they
need a key), and otherwise work here, in this process (--local: always here).

Every command takes --help. Configuration comes from the environment (see README).`,
  serve: `Usage: lectern serve [textgen|rag|all]

Starts the text generation app (TEXTGEN_PORT, 8000), the RAG app (RAG_PORT, 8001), or both.`,
  "index build": `Usage: lectern index build <name> <file-or-folder…> [options]

Reads the files (folders: every supported file below them), then builds the index in one write.
A file that cannot be read or parsed is skipped and listed with the reason; the others are indexed
(exit 0, with the count skipped). With --mode create an existing index is refused before any file is
read.
  --mode create|replace|append   default create (refused, exit 4, if the index exists)
  --strict                       stop at the first file that cannot be read (exit 4, nothing written)
  ${SCORER_OPTION}default ${DEFAULT_SCORER}
  --chunk-size N                 ${CHUNK_SIZES}
  --overlap N                    default min(128, chunk-size/2)
  --tenant ID                    default "default"
  --json                         print the result as JSON`,
  "index list": `Usage: lectern index list [--tenant ID | --all] [--json]`,
  "index rm": `Usage: lectern index rm <name> [--tenant ID] [--json]`,
  "index sync": `Usage: lectern index sync <name> <dir> [options]

Makes the index's documents from <dir> match its files: new files are added, changed ones (sha256 of
their bytes) replaced, removed ones deleted, in one write (none when nothing changed). Document ids are
file paths relative to RAG_FILES_DIR when it is set (<dir> must then lie inside it, as for the HTTP
route), else relative to <dir>. A file that cannot be parsed is reported and left as it was; the others
still sync (exit code 4 when any failed). A missing index is created with the settings below.
  --watch                        sync again whenever something below <dir> changes, one line per
                                 sync, until SIGINT or SIGTERM (exit 0)
  ${SCORER_OPTION}when creating: default ${DEFAULT_SCORER}
  --chunk-size N                 when creating: ${CHUNK_SIZES}
  --overlap N                    when creating: default min(128, chunk-size/2)
  --tenant ID                    default "default"
  --json                         print each result as JSON (one line per sync with --watch)`,
  ask: `Usage: lectern ask <index> "<question>" [options]

Asks the running RAG app (LECTERN_RAG_URL) when it answers: its answer (generative when it has a
model), streamed. Otherwise reads the index here and answers as POST /rag/query does: with
GENERATION_URL set, its model writes the answer from as many results as fit its context
(GENERATION_CONTEXT_SIZE); else the answer is extractive.
  --top-k N                         results to use, default 5
  --answer extractive|generative    the answer mode (default: generative when a model writes answers)
  --tenant ID                       default "default"
  --local                           read the index here, even when the app runs
  --json                            print the whole response as JSON`,
  mcp: `Usage: lectern mcp [--tenant ID]

An MCP server on stdin and stdout, for clients that start it (Claude Desktop, Claude Code, IDEs):
tools list_indices, search, ask, fetch_document, add_document, and the indices and documents as
resources (lectern://{index}/{document}). It reads the store here (DATA_DIR, or DATABASE_URL), as the
index commands do: no running app and no key needed. Answers are written by GENERATION_URL's model
when it is set, else extractive. It ends when its client closes stdin.
  --tenant ID    the tenant whose indices it serves, default "default"`,
  generate: `Usage: lectern generate "<prompt>" [options]

Asks the running text generation app (LECTERN_URL) when it answers, streaming its text; otherwise
loads the model here (MODEL_PATH), which takes longer.
  --max-length N     new tokens, default 128
  --temperature T    default 0.8 (0 = deterministic)
  --seed N
  --local            load the model here, even when the app runs
  --json             print the result as JSON instead of streaming text`,
  models: `Usage: lectern models [--server URL] [--local] [--json]

Lists every model the text generation app serves: MODEL_PATH, EMBEDDING_MODEL_PATH, each .gguf in
MODELS_DIR and MODELS_PRESETS' entries, each by its one name (the file name without .gguf, or the
preset's section), with role, architecture, size and aliases. When the app answers (LECTERN_URL, or
--server URL) its status is shown (loaded, loading, unloaded, failed); otherwise, or with --local,
the files are checked here (status "ok" or why not).`,
  "model pull": `Usage: lectern model pull <hf:owner/repo/file.gguf | https URL>

Downloads the model once into MODELS_DIR (default ./models) with a progress bar.`,
};

interface Parsed {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

function options(args: string[], spec: ParseArgsConfig["options"]): Parsed {
  try {
    const parsed = parseArgs({
      args,
      options: { ...spec, help: { type: "boolean" }, json: { type: "boolean" } },
      allowPositionals: true,
    });
    return { values: parsed.values as Parsed["values"], positionals: parsed.positionals };
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

const integer = (value: unknown, name: string): number | undefined => {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || !/^\d+$/.test(value))
    throw new UsageError(`--${name} must be a whole number`);
  return Number(value);
};

/** cli-progress, loaded (loadProgress) by the commands that show progress on a terminal only. */
let progressBars: typeof CliProgress | undefined;

async function loadProgress(): Promise<void> {
  if (process.stderr.isTTY) progressBars ??= await import("cli-progress");
}

/** A progress display: a bar on a terminal (after loadProgress), plain lines otherwise (logs, pipes, CI). */
function progress(total: number, label: string) {
  const started = performance.now();
  const bars = progressBars;
  const bar = bars
    ? new bars.SingleBar(
        {
          format: `${label} {bar} {value}/{total} files | {chunks} | {elapsed}s | {rate}`,
          stream: process.stderr,
          hideCursor: true,
        },
        bars.Presets.shades_classic,
      )
    : null;
  bar?.start(total, 0, { chunks: "", elapsed: "0.0", rate: "" });
  let lastLine = 0;
  return {
    tick(done: number, name: string, chars: number) {
      const seconds = (performance.now() - started) / 1000;
      const rate =
        `${(done / Math.max(seconds, 1e-3)).toFixed(1)} files/s` +
        (chars > 0 ? `, ${(chars / 1e6 / Math.max(seconds, 1e-3)).toFixed(2)} MB/s` : "");
      if (bar) bar.update(done, { elapsed: seconds.toFixed(1), rate, chunks: name });
      else if (done === total || performance.now() - lastLine > 1000) {
        lastLine = performance.now();
        process.stderr.write(`${label}: ${done}/${total} files read (${rate}) ${name}\n`);
      }
    },
    stop() {
      bar?.stop();
    },
  };
}

interface FileToIndex {
  file: string;
  /** The document id: what `index sync` of the same folder would give the file. */
  id: string;
}

/**
 * The files below the paths given, each with the id `index sync` gives it: its path relative to the
 * folder given (relative to RAG_FILES_DIR when that is set and holds the folder), or its name for a
 * file given on its own. So `index build docs DIR` then `index sync docs DIR` finds nothing changed,
 * whether DIR is written relative or absolute.
 */
async function collectFiles(paths: string[], filesDir: string | null): Promise<FileToIndex[]> {
  const { isIndexable } = await loaders();
  const { resolveFolder, within } = await import("../rag/ingest/files.js");
  const realFilesDir = filesDir ? await realpath(filesDir).catch(() => null) : null;
  const found = new Map<string, FileToIndex>();
  const add = (file: string, id: string) => {
    const previous = found.get(id);
    if (previous && previous.file !== file)
      throw new UsageError(
        `${previous.file} and ${file} would both be document "${id}"; index them separately`,
      );
    found.set(id, { file, id });
  };
  const visit = async (item: string, root: string, named: boolean) => {
    const info = await stat(item).catch(() => null);
    if (!info) throw notFound(`No such file or folder: ${item}`);
    if (info.isDirectory()) {
      const entries = (await readdir(item)).filter((name) => !name.startsWith(".")).sort();
      for (const entry of entries) await visit(path.join(item, entry), root, false);
    } else if (info.isFile() && (named || isIndexable(item))) add(item, path.relative(root, item));
  };
  for (const item of paths) {
    const info = await stat(item).catch(() => null);
    if (!info) throw notFound(`No such file or folder: ${item}`);
    const real = await realpath(item);
    if (info.isDirectory()) {
      // As index sync: ids relative to RAG_FILES_DIR when it holds the folder, else to the folder.
      const inFilesDir = filesDir ? await resolveFolder(filesDir, real).catch(() => null) : null;
      const root = inFilesDir?.root ?? real;
      await visit(real, root, true);
    } else {
      const inFilesDir = realFilesDir !== null && within(real, realFilesDir);
      add(item, inFilesDir ? path.relative(realFilesDir, real) : path.basename(item));
    }
  }
  return [...found.values()];
}

async function withService<T>(config: Config, work: (service: RagService) => Promise<T>): Promise<T> {
  const [{ openIndexStore }, { RagService }] = await Promise.all([
    import("../rag/store/open.js"),
    import("../rag/service.js"),
  ]);
  const store = await openIndexStore(config.rag);
  const service = new RagService(store);
  try {
    return await work(service);
  } finally {
    // The service first: it waits for a background merge, which must not find the store closed.
    await service.close();
    await store.close();
  }
}

/** The options `index build` and `index sync` share: how the index is made, and whose it is. */
const INDEX_SETTINGS = {
  scorer: { type: "string" },
  "chunk-size": { type: "string" },
  overlap: { type: "string" },
  tenant: { type: "string" },
} as const;

/** --scorer, --chunk-size and --overlap, resolved and checked as every build's (the service's rules). */
function indexSettings(values: Parsed["values"]) {
  try {
    return resolveIndexSettings({
      scorer: values.scorer as IndexSettings["scorer"] | undefined,
      chunkSize: integer(values["chunk-size"], "chunk-size"),
      overlap: integer(values.overlap, "overlap"),
    });
  } catch (error) {
    // A bad option value is a usage error here (exit 2), named by its flag.
    if (!(error instanceof DomainError)) throw error;
    const field = ((error.details[0] as { path?: string } | undefined)?.path ?? "").slice(1);
    throw new UsageError(field ? `--${field.replace("_", "-")}: ${error.message}` : error.message);
  }
}

async function indexBuild(args: string[], config: Config): Promise<number> {
  const { values, positionals } = options(args, {
    mode: { type: "string" },
    strict: { type: "boolean" },
    ...INDEX_SETTINGS,
  });
  if (values.help) return help("index build");
  const [name, ...paths] = positionals;
  if (!name || paths.length === 0)
    throw new UsageError("index build needs a name and at least one file or folder");
  const mode = (values.mode as string | undefined) ?? "create";
  if (!["create", "replace", "append"].includes(mode))
    throw new UsageError("--mode must be create, replace or append");
  const { scorer, chunkSize, overlap } = indexSettings(values);
  const key = { tenantId: (values.tenant as string | undefined) ?? "default", name };
  // Before reading a thousand files, not after: create refuses an index that exists.
  if (mode === "create") await refuseExisting(config, key);

  const files = await collectFiles(paths, config.rag.ragFilesDir);
  if (files.length === 0) {
    const { SUPPORTED_EXTENSIONS } = await loaders();
    throw badRequest(`No supported files (${SUPPORTED_EXTENSIONS.join(" ")}) found`);
  }
  const { documents, skipped } = await readDocuments(files, `index ${name}`, values.strict === true);
  if (documents.length === 0)
    throw badRequest(`None of the ${files.length} files could be read; nothing was indexed`);
  if (!values.json) process.stderr.write(`indexing ${documents.length} documents…\n`);
  const built = await withService(config, (service) =>
    service.build({
      key,
      documents,
      chunkSize,
      overlap,
      scorer,
      mode: mode as "create" | "replace" | "append",
    }),
  );
  const result = {
    index_name: name,
    documents_count: built.documentsCount,
    chunks_count: built.chunksCount,
    vocabulary_size: built.meta.vocabularySize,
    build_ms: built.buildMs,
    skipped,
  };
  if (values.json) print(result);
  else {
    process.stdout.write(
      `Built "${name}": ${result.documents_count} documents, ${result.chunks_count} chunks, ` +
        `${result.vocabulary_size} terms in ${(result.build_ms / 1000).toFixed(2)} s` +
        (skipped.length > 0 ? `; ${skipped.length} files skipped (listed above)` : "") +
        "\n",
    );
  }
  return EXIT.ok;
}

/** `--mode create` on an index that exists: refused before any file is read, saying what to use. */
async function refuseExisting(config: Config, key: { tenantId: string; name: string }): Promise<void> {
  const exists = await withService(config, (service) =>
    service.requireMeta(key).then(
      () => true,
      (error: unknown) => {
        if (error instanceof DomainError && error.kind === "not_found") return false;
        throw error;
      },
    ),
  );
  if (exists)
    throw new DomainError(
      "conflict",
      `The index "${key.name}" already exists; use --mode replace to rebuild it from these files, or --mode append to add them`,
    );
}

/**
 * Reads and parses the files, with a progress display. A file that cannot be read or parsed is
 * skipped and reported on stderr with its reason (real folders hold a few: binary files named .txt,
 * HTML without markup, a PDF without text); with `strict`, the first one stops the build instead.
 */
async function readDocuments(
  files: FileToIndex[],
  label: string,
  strict: boolean,
): Promise<{ documents: DocumentInput[]; skipped: Array<{ file: string; message: string }> }> {
  const { loadFile } = await loaders();
  await loadProgress();
  const bar = progress(files.length, label);
  const documents: DocumentInput[] = [];
  const skipped: Array<{ file: string; message: string }> = [];
  let chars = 0;
  try {
    for (const [index, { file, id }] of files.entries()) {
      try {
        const bytes = await readFile(file);
        const loaded = await loadFile(id, bytes);
        chars += loaded.text.length;
        // Id, source, metadata.file and content hash exactly as index sync stores them.
        documents.push({
          id,
          text: loaded.text,
          title: loaded.title,
          metadata: { ...loaded.metadata, file: id },
          source: id,
          contentHash: createHash("sha256").update(bytes).digest("hex"),
          pageStarts: loaded.pageStarts,
          sections: loaded.sections,
        });
      } catch (error) {
        if (strict) throw error;
        const message = (error as Error).message.replace(`File "${id}": `, "");
        skipped.push({ file: id, message });
      }
      bar.tick(index + 1, path.basename(file), chars);
    }
  } finally {
    bar.stop();
  }
  for (const { file, message } of skipped) process.stderr.write(`lectern: skipped ${file}: ${message}\n`);
  return { documents, skipped };
}

async function indexList(args: string[], config: Config): Promise<number> {
  const { values } = options(args, { tenant: { type: "string" }, all: { type: "boolean" } });
  if (values.help) return help("index list");
  const tenant = values.all ? null : ((values.tenant as string | undefined) ?? "default");
  const indices = await withService(config, (service) => service.listIndices(tenant));
  if (values.json) {
    print(indices);
    return EXIT.ok;
  }
  if (indices.length === 0) process.stdout.write("no indices\n");
  for (const meta of indices) {
    process.stdout.write(
      `${meta.tenantId}/${meta.name}\t${meta.scorer}\t${meta.documentsCount} documents\t${meta.chunksCount} chunks\tupdated ${meta.updatedAt}\n`,
    );
  }
  return EXIT.ok;
}

async function indexRm(args: string[], config: Config): Promise<number> {
  const { values, positionals } = options(args, { tenant: { type: "string" } });
  if (values.help) return help("index rm");
  const name = positionals[0];
  if (!name) throw new UsageError("index rm needs the index name");
  await withService(config, (service) =>
    service.deleteIndex({ tenantId: (values.tenant as string | undefined) ?? "default", name }),
  );
  if (values.json) print({ deleted: name });
  else process.stdout.write(`Deleted "${name}"\n`);
  return EXIT.ok;
}

/** Waits after the last change event before syncing, so a burst of writes (a copy, a checkout) syncs once. */
const WATCH_DEBOUNCE_MS = 250;

async function indexSync(args: string[], config: Config): Promise<number> {
  const { values, positionals } = options(args, { watch: { type: "boolean" }, ...INDEX_SETTINGS });
  if (values.help) return help("index sync");
  const [name, dir, ...extra] = positionals;
  if (!name || !dir || extra.length > 0) throw new UsageError("index sync needs a name and one folder");
  const settings = indexSettings(values);

  const [{ syncFolder }, { resolveFolder }] = await Promise.all([
    import("../rag/service/sync.js"),
    import("../rag/ingest/files.js"),
  ]);
  const absolute = path.resolve(dir);
  const info = await stat(absolute).catch(() => null);
  if (!info?.isDirectory()) throw notFound(`No such folder: ${dir}`);
  // With RAG_FILES_DIR set, ids are relative to it (as the HTTP route stores them); else to the folder.
  const { root, folder } = await resolveFolder(config.rag.ragFilesDir ?? absolute, absolute);
  const key = { tenantId: (values.tenant as string | undefined) ?? "default", name };

  return withService(config, async (service) => {
    const syncOnce = async () => {
      // A live count of the files looked at, made once the listing says how many there are.
      let bar: ReturnType<typeof progress> | undefined;
      if (!values.json) await loadProgress();
      const walk = {
        maxEntries: config.rag.filesMaxEntries,
        timeoutMs: config.rag.filesWalkTimeoutMs,
        allowHardLinks: config.rag.filesAllowHardLinks,
      };
      let result;
      try {
        result = await syncFolder(service, {
          key,
          root,
          folder,
          settings,
          walk,
          onFile: values.json
            ? undefined
            : (done, total, file) => {
                bar ??= progress(total, `sync ${name}`);
                bar.tick(done, path.basename(file), 0);
              },
        });
      } finally {
        bar?.stop();
      }
      if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else {
        process.stdout.write(
          `synced "${name}": ${result.added} added, ${result.updated} updated, ${result.deleted} deleted, ` +
            `${result.unchanged} unchanged, ${result.failed.length} failed; ` +
            `${result.documents_count} documents, ${result.chunks_count} chunks (${Math.round(result.elapsed_ms)} ms)\n`,
        );
        for (const failure of result.failed) {
          process.stderr.write(`lectern: not synced: ${failure.file}: ${failure.message}\n`);
        }
      }
      return result;
    };
    if (!values.watch) return (await syncOnce()).failed.length > 0 ? EXIT.refused : EXIT.ok;
    return watchFolder(folder, syncOnce);
  });
}

/**
 * Syncs now and after every burst of changes below `folder`, one sync at a time (changes during a
 * sync start another after it), until SIGINT or SIGTERM: then the running sync finishes and 0 is
 * returned. The watcher is up before the first sync, so nothing changed after its line is missed.
 */
async function watchFolder(folder: string, syncOnce: () => Promise<unknown>): Promise<number> {
  const { watch } = await import("node:fs");
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | null = null;
  let again = false;
  let stopping = false;
  const run = () => {
    if (stopping) return;
    if (running) {
      again = true;
      return;
    }
    running = syncOnce()
      .then(
        () => undefined,
        (error: unknown) => {
          // One failed sync (a folder being moved, a database hiccup) does not end the watch.
          process.stderr.write(`lectern: sync failed: ${(error as Error).message}\n`);
        },
      )
      .finally(() => {
        running = null;
        if (again) {
          again = false;
          run();
        }
      });
  };
  return new Promise<number>((resolve) => {
    const finish = (code: number) => {
      if (stopping) return;
      stopping = true;
      clearTimeout(timer);
      watcher.close();
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      void (running ?? Promise.resolve()).then(() => resolve(code));
    };
    const onSignal = () => finish(EXIT.ok);
    const watcher = watch(folder, { recursive: true }, () => {
      clearTimeout(timer);
      timer = setTimeout(run, WATCH_DEBOUNCE_MS);
    });
    watcher.on("error", (error) => {
      process.stderr.write(`lectern: watching ${folder} failed: ${error.message}\n`);
      finish(EXIT.failed);
    });
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    run();
  });
}

interface AskResponse {
  results: Array<{ file: string; score: number; metadata: Record<string, unknown> }>;
  count: number;
  answer: string | null;
  answer_mode?: string;
  generation_skipped_reason?: string;
}

async function ask(args: string[], config: Config): Promise<number> {
  const { values, positionals } = options(args, {
    "top-k": { type: "string" },
    tenant: { type: "string" },
    answer: { type: "string" },
    local: { type: "boolean" },
  });
  if (values.help) return help("ask");
  const [name, ...words] = positionals;
  const question = words.join(" ").trim();
  if (!name || !question) throw new UsageError('ask needs an index and a question: lectern ask docs "…"');
  const topK = integer(values["top-k"], "top-k") ?? 5;
  const answerMode = values.answer as string | undefined;
  if (answerMode !== undefined && !["extractive", "generative"].includes(answerMode))
    throw new UsageError("--answer must be extractive or generative");
  const tenant = values.tenant as string | undefined;
  const app = values.local ? null : await findApp(config.client.ragUrl, "RAG", config.client.apiKey);
  let response: AskResponse;
  if (app) {
    const body = {
      index_name: name,
      query: question,
      top_k: topK,
      ...(tenant !== undefined && { tenant_id: tenant }),
      ...(answerMode !== undefined && { answer: answerMode }),
    };
    // The answer streams as it is written; the sources follow it.
    response = values.json
      ? await postJson<AskResponse>(app, "/rag/query", body)
      : await postStream<AskResponse>(app, "/rag/query", body, (piece) => process.stdout.write(piece));
    if (!values.json && response.answer_mode !== "generative")
      process.stdout.write(response.answer ?? "No answer found in this index.");
  } else {
    response = await askHere(config, {
      key: { tenantId: tenant ?? "default", name },
      query: question,
      top_k: topK,
      min_score: 0,
      ...(answerMode !== undefined && { answer: answerMode as "extractive" | "generative" }),
    });
    if (!values.json) process.stdout.write(response.answer ?? "No answer found in this index.");
  }
  if (values.json) {
    print(response);
    return EXIT.ok;
  }
  process.stdout.write("\n");
  if (response.generation_skipped_reason)
    process.stderr.write(`lectern: answered extractively: ${response.generation_skipped_reason}\n`);
  process.stdout.write("\nSources:\n");
  response.results.forEach((result, index) => {
    // PDF provenance: `pages` every page the chunk covers, `page` the first.
    const pages = Array.isArray(result.metadata.pages) ? (result.metadata.pages as number[]) : [];
    const page =
      pages.length > 1
        ? `, pages ${pages[0]}–${pages[pages.length - 1]}`
        : typeof result.metadata.page === "number"
          ? `, page ${result.metadata.page}`
          : "";
    process.stdout.write(`  [${index + 1}] ${result.file}${page}  (score ${result.score.toFixed(3)})\n`);
  });
  if (response.generation_skipped_reason)
    process.stderr.write(`lectern: answered extractively: ${response.generation_skipped_reason}\n`);
  return response.count === 0 ? EXIT.notFound : EXIT.ok;
}

interface PredictResponse {
  generated_text: string;
  model_name: string;
  tokens_generated: number;
  finish_reason: string;
  prompt_tokens: number;
}

async function generate(args: string[], config: Config): Promise<number> {
  const { values, positionals } = options(args, {
    "max-length": { type: "string" },
    temperature: { type: "string" },
    seed: { type: "string" },
    local: { type: "boolean" },
  });
  if (values.help) return help("generate");
  const prompt = positionals.join(" ");
  if (!prompt) throw new UsageError('generate needs a prompt: lectern generate "Once upon a time"');
  const temperature = values.temperature === undefined ? 0.8 : Number(values.temperature);
  if (!(temperature >= 0 && temperature <= 2)) throw new UsageError("--temperature must be between 0 and 2");
  const maxLength = integer(values["max-length"], "max-length") ?? 128;
  const seed = integer(values.seed, "seed");
  const app = values.local
    ? null
    : await findApp(config.client.textgenUrl, "Text Generation", config.client.apiKey);
  let result: PredictResponse;
  if (app) {
    const body = { text: prompt, max_length: maxLength, temperature, ...(seed !== undefined && { seed }) };
    result = values.json
      ? await postJson<PredictResponse>(app, "/predict", body)
      : await postStream<PredictResponse>(app, "/predict", body, (piece) => process.stdout.write(piece));
  } else result = await generateHere(config, prompt, maxLength, temperature, seed, values.json !== true);
  if (values.json) {
    const { generated_text, model_name, tokens_generated, finish_reason, prompt_tokens } = result;
    print({ generated_text, model_name, tokens_generated, finish_reason, prompt_tokens });
  } else process.stdout.write("\n");
  return EXIT.ok;
}

/** An answer in this process, as the RAG app answers without a model of its own: GENERATION_URL's, else extractive. */
async function askHere(config: Config, input: AskInput): Promise<AskResponse> {
  const [answering, generation, { Retrievers }, { answerWriterFor }] = await Promise.all([
    import("../rag/answering/ask.js"),
    import("../rag/answering/upstream-generation.js"),
    import("../rag/retrieval/retrievers.js"),
    import("../rag/answering/generative.js"),
  ]);
  const answerWriter = answerWriterFor(generation.generationPortFor(config.generation, undefined));
  const retrievers = new Retrievers(config.rag);
  return withService(config, async (service) => {
    try {
      return (await answering.ask({ service, answerWriter, retrievers }, input).result) as AskResponse;
    } finally {
      await answerWriter?.close();
      await retrievers.close();
    }
  });
}

async function mcp(args: string[], config: Config): Promise<number> {
  const { values, positionals } = options(args, { tenant: { type: "string" } });
  if (values.help) return help("mcp");
  if (positionals.length > 0) throw new UsageError("mcp takes no arguments");
  const tenant = typeof values.tenant === "string" ? values.tenant : "default";
  if (!new RegExp(NAME_PATTERN).test(tenant)) throw new UsageError(`"${tenant}" is not a valid tenant id`);
  const { serveMcpStdio } = await import("../rag/mcp/stdio.js");
  await serveMcpStdio(config, tenant);
  return EXIT.ok;
}

/** Generation in this process: the model loads here (seconds to minutes), one sequence. */
async function generateHere(
  config: Config,
  prompt: string,
  maxTokens: number,
  temperature: number,
  seed: number | undefined,
  stream: boolean,
): Promise<PredictResponse> {
  const { createGenerator } = await import("../textgen/engine/create-generator.js");
  const generator = createGenerator({
    ...config,
    textgen: { ...config.textgen, maxConcurrent: 1 },
  }) as LlamaGenerator;
  try {
    await generator.ready?.();
    const status = generator.status();
    if (status.state === "unhealthy") throw notReady(status.reason, "model_not_ready");
    const result = await generator.generate(
      { prompt, maxTokens, temperature, seed, stop: [] },
      onTextDeltas(stream ? (piece) => process.stdout.write(piece) : undefined),
    );
    return {
      generated_text: result.text,
      model_name: generator.modelName,
      tokens_generated: result.tokensGenerated,
      finish_reason: result.finishReason,
      prompt_tokens: result.promptTokens,
    };
  } finally {
    await generator.close();
  }
}

async function modelPull(args: string[], config: Config): Promise<number> {
  const { values, positionals } = options(args, {});
  if (values.help) return help("model pull");
  const reference = positionals[0];
  if (!reference) throw new UsageError("model pull needs a reference such as hf:owner/repo/file.gguf");
  const { resolveModel } = await import("../textgen/engine/model-source.js");
  const file = await resolveModel({ reference, modelsDir: config.models.modelsDir, progress: true });
  if (values.json) print({ reference, path: file });
  else process.stdout.write(`${file}\n`);
  return EXIT.ok;
}

interface ModelRow {
  id: string;
  role: string;
  architecture: string | null;
  size_bytes: number | null;
  status: string;
  reason?: string;
  aliases: string[];
}

async function models(args: string[], config: Config): Promise<number> {
  const { values } = options(args, { server: { type: "string" }, local: { type: "boolean" } });
  if (values.help) return help("models");
  const url =
    typeof values.server === "string" ? values.server.replace(/\/+$/, "") : config.client.textgenUrl;
  const app = values.local ? null : await findApp(url, "Text Generation", config.client.apiKey);
  if (!app && typeof values.server === "string")
    throw notReady(`No Lectern text generation app answers at ${url}`);
  let rows: ModelRow[];
  if (app) rows = (await getJson<{ data: ModelRow[] }>(app, "/v1/models")).data;
  else {
    rows = await modelsHere(config);
    if (!values.json)
      process.stderr.write(
        `lectern: no app answers at ${url}: the files are checked here, nothing is loaded\n`,
      );
  }
  if (values.json) {
    print(rows);
    return EXIT.ok;
  }
  const size = (bytes: number | null) => (bytes === null ? "-" : `${(bytes / 1024 ** 2).toFixed(1)} MB`);
  const table = [["MODEL", "ROLE", "ARCH", "SIZE", "STATUS", "ALIASES"]].concat(
    rows.map((row) => [
      row.id,
      row.role,
      row.architecture ?? "-",
      size(row.size_bytes),
      row.reason ? `${row.status}: ${row.reason}` : row.status,
      row.aliases.join(", "),
    ]),
  );
  const widths = table[0]!.map((_, column) => Math.max(...table.map((line) => line[column]!.length)));
  for (const line of table)
    process.stdout.write(
      `${line
        .map((cell, column) => cell.padEnd(widths[column]!))
        .join("  ")
        .trimEnd()}\n`,
    );
  return EXIT.ok;
}

/** The catalogue as the app would serve it, its files checked here (headers only: nothing loads). */
async function modelsHere(config: Config): Promise<ModelRow[]> {
  const [{ buildCatalogue, catalogueSources }, { ModelRegistry }, { contextTokensOf }] = await Promise.all([
    import("../textgen/engine/presets.js"),
    import("../textgen/engine/model-registry.js"),
    import("../textgen/engine/context-plan.js"),
  ]);
  const catalogue = buildCatalogue(catalogueSources(config));
  const registry = new ModelRegistry({
    entries: catalogue.entries,
    defaultId: catalogue.defaultId,
    resolveFile: () => Promise.reject(new Error("not loading")),
    createBackend: () => Promise.reject(new Error("not loading")),
    contextTokensOf: (entry, summary) => contextTokensOf(config, entry, summary),
    maxLoaded: 0,
    memoryBudget: 0,
    defaultKeepAliveMs: -1,
  });
  await registry.inspectLocal();
  return registry.list().map((model) => ({
    id: model.id,
    role: model.roles[0]!,
    architecture: model.architecture,
    size_bytes: model.sizeBytes,
    status: model.status === "failed" ? "bad" : model.sizeBytes === null ? "not downloaded" : "ok",
    ...(model.reason !== undefined && { reason: model.reason }),
    aliases: model.aliases,
  }));
}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

function help(topic: string): number {
  process.stdout.write(`${HELP[topic] ?? HELP.main}\n`);
  return EXIT.ok;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === "--help" || command === "-h" || command === "help") return help("main");
  const config = loadConfigOrReport();
  if (config === null) return EXIT.config;
  try {
    switch (command) {
      case "serve": {
        if (rest.includes("--help")) return help("serve");
        const which = (rest[0] ?? "all") as Which;
        if (!["textgen", "rag", "all"].includes(which))
          throw new UsageError("serve takes textgen, rag or all");
        // The same start-up checks, messages, exit codes and SIGTERM/SIGINT drain as `npm start`.
        const { runServers } = await import("./run-servers.js");
        await runServers(which, config);
        return -1; // keep running
      }
      case "index": {
        const [sub, ...args] = rest;
        if (sub === undefined || sub === "--help") {
          for (const topic of ["index build", "index list", "index rm", "index sync"]) help(topic);
          return EXIT.ok;
        }
        if (sub === "build") return await indexBuild(args, config);
        if (sub === "list" || sub === "ls") return await indexList(args, config);
        if (sub === "rm" || sub === "delete") return await indexRm(args, config);
        if (sub === "sync") return await indexSync(args, config);
        throw new UsageError(`unknown index command "${sub ?? ""}"; use build, list, rm or sync`);
      }
      case "ask":
        return await ask(rest, config);
      case "generate":
        return await generate(rest, config);
      case "models":
        return await models(rest, config);
      case "mcp":
        return await mcp(rest, config);
      case "model": {
        const [sub, ...args] = rest;
        if (sub === undefined || sub === "--help") return help("model pull");
        if (sub === "pull") return await modelPull(args, config);
        throw new UsageError(`unknown model command "${sub ?? ""}"; use pull`);
      }
      default:
        throw new UnknownCommandError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UnknownCommandError) {
      process.stderr.write(`lectern: ${error.message}\nRun "lectern --help" for the commands.\n`);
      return EXIT.usage;
    }
    if (error instanceof UsageError) {
      process.stderr.write(`lectern: ${error.message}\nRun "lectern ${command} --help" for usage.\n`);
      return EXIT.usage;
    }
    if (error instanceof DomainError) {
      process.stderr.write(`lectern: ${error.message}\n`);
      return error.kind === "not_found"
        ? EXIT.notFound
        : REFUSED.has(error.kind)
          ? EXIT.refused
          : EXIT.failed;
    }
    process.stderr.write(`lectern: ${(error as Error).message}\n`);
    return EXIT.failed;
  }
}

const code = await main(process.argv.slice(2));
if (code >= 0) process.exit(code);
