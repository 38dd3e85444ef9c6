/**
 * Where the model file comes from. `MODEL_PATH` is either a local `.gguf` path or a remote
 * reference (`hf:<owner>/<repo>/<file>.gguf`, or an https URL) that is downloaded once into
 * `MODELS_DIR`, with a progress bar on a terminal; later starts find the file there and stay offline.
 */
import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { SingleBar, Presets } from "cli-progress";
import { resolveModelFile } from "node-llama-cpp";
import { isRemoteModelReference } from "../../core/config.js";
import { inspectGguf } from "./gguf-check.js";

export interface ModelSource {
  /** MODEL_PATH as given. */
  reference: string;
  modelsDir: string;
  /** Show a download progress bar (only where stderr is a terminal). */
  progress?: boolean;
  /**
   * The reference is a local file gguf-check.ts has already read (the registry checks every file
   * before its load): used as it is. Reading a GGUF's header again costs tens of ms per load.
   */
  checked?: boolean;
}

/**
 * Returns the local file path, downloading the model first when it is a remote reference. The file
 * is checked first (gguf-check.ts): a bad one fails here with the reason instead of in llama.cpp.
 */
export async function resolveModel(source: ModelSource): Promise<string> {
  if (source.checked) return path.resolve(source.reference);
  const file = await locateModel(source);
  await inspectGguf(file);
  return file;
}

/** The local file of a reference, downloaded first when remote; not checked (see resolveModel). */
export async function locateModel(source: ModelSource): Promise<string> {
  if (!isRemoteModelReference(source.reference)) {
    const file = path.resolve(source.reference);
    if (!existsSync(file)) throw new Error(`no file at ${file}`);
    if (!statSync(file).isFile()) throw new Error(`${file} is not a file`);
    return file;
  }
  try {
    // Already downloaded: no network at all.
    return await resolveModelFile(source.reference, {
      directory: source.modelsDir,
      download: false,
      cli: false,
    });
  } catch {
    // Not there yet: download below.
  }
  // The downloader retries an unreachable host for ever; fail fast instead, so /health can say why.
  await assertReachable(source.reference);
  const bar =
    source.progress && process.stderr.isTTY
      ? new SingleBar(
          { format: "model {bar} {percentage}% | {value}/{total} MiB", stream: process.stderr },
          Presets.shades_classic,
        )
      : null;
  let started = false;
  try {
    return await resolveModelFile(source.reference, {
      directory: source.modelsDir,
      cli: false,
      onProgress: ({ totalSize, downloadedSize }) => {
        if (!bar) return;
        const mib = (bytes: number) => Math.round(bytes / 2 ** 20);
        if (!started) {
          bar.start(mib(totalSize), 0);
          started = true;
        }
        bar.update(mib(downloadedSize));
      },
    });
  } finally {
    if (started) bar?.stop();
  }
}

async function assertReachable(reference: string): Promise<void> {
  const origin = reference.toLowerCase().startsWith("hf:")
    ? "https://huggingface.co"
    : new URL(reference).origin;
  try {
    await fetch(origin, { method: "HEAD", signal: AbortSignal.timeout(10_000) });
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
    throw new Error(
      `the model is not in MODELS_DIR and ${origin} cannot be reached to download it (${cause})`,
    );
  }
}
