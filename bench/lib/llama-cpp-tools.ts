/**
 * llama.cpp's own tools for the side-by-side benchmark (bench/llama-server.ts): `llama-server`, the
 * reference, and `llama-quantize`, which makes a model of real size from a synthetic F32 one. Both
 * are built from the very llama.cpp release node-llama-cpp ships (its git bundle in
 * node_modules/node-llama-cpp/llama/gitRelease.bundle), so the two servers run the same kernels.
 *
 * They are built once into a cache folder outside the repository (LECTERN_LLAMA_CACHE, by default
 * ~/.cache/lectern-llama) and reused from there: never committed, never built when the app runs. The
 * build takes about 10 minutes on 2 cores; its output goes to <cache>/*.log.
 */
import { spawn } from "node:child_process";
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { repoRoot } from "./bench-env.js";
import { syntheticModel, syntheticModelName, type SyntheticShape } from "../../scripts/lib/synthetic-gguf.js";

export const llamaCacheDir = path.resolve(
  process.env.LECTERN_LLAMA_CACHE ?? path.join(os.homedir(), ".cache/lectern-llama"),
);
const sourceDir = path.join(llamaCacheDir, "src");
const buildDir = path.join(sourceDir, "build");
const modelsDir = path.join(llamaCacheDir, "models");

/** Qwen2.5-0.5B's shape (its vocabulary aside): 24 layers, 896 wide, grouped-query attention. */
export const QWEN_0_5B_SHAPE: SyntheticShape = {
  embedding: 896,
  feedForward: 4864,
  layers: 24,
  heads: 14,
  kvHeads: 2,
};

/** A few MB of weights: for checking that a benchmark runs, not for its figures. */
export const SMALL_SHAPE: SyntheticShape = {
  embedding: 256,
  feedForward: 704,
  layers: 4,
  heads: 4,
  kvHeads: 2,
};

/** The models' folder of the cache (synthetic models the benchmarks make). */
export const cachedModelsDir = modelsDir;

/** Qwen2.5-1.5B's shape. */
export const QWEN_1_5B_SHAPE: SyntheticShape = {
  embedding: 1536,
  feedForward: 8960,
  layers: 28,
  heads: 12,
  kvHeads: 2,
};

/** GCC/Clang flags that keep AMX instructions out of a -march=native build (see ensureLlamaTools). */
export const NO_AMX_FLAGS = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16";

export interface LlamaTools {
  server: string;
  quantize: string;
}

/** Runs a command with its output appended to `logFile`; rejects on a non-zero exit. */
function run(command: string, args: string[], cwd: string, logFile: string): Promise<void> {
  const log = createWriteStream(logFile, { flags: "a" });
  log.write(`$ ${command} ${args.join(" ")}\n`);
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    child.once("error", reject);
    child.once("exit", (code) => {
      log.end(`exit ${code}\n`);
      if (code === 0) resolve();
      else reject(new Error(`${command} ${args.join(" ")} exited with ${code}; see ${logFile}`));
    });
  });
}

/** `llama-server` and `llama-quantize` of the bundled release, built into the cache when missing. */
export async function ensureLlamaTools(log: (line: string) => void = console.log): Promise<LlamaTools> {
  const tools = {
    server: path.join(buildDir, "bin/llama-server"),
    quantize: path.join(buildDir, "bin/llama-quantize"),
  };
  const cmakeOptions = [
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
    // This CPU's instructions (GGML_NATIVE, the default) but AMX: llama.cpp's AMX matrix kernels
    // with OpenMP threads stop on an illegal instruction (tilezero in a thread whose tile
    // configuration was never loaded) on the Sapphire Rapids machines here; the AVX-512 ones run.
    `-DCMAKE_C_FLAGS=${NO_AMX_FLAGS}`,
    `-DCMAKE_CXX_FLAGS=${NO_AMX_FLAGS}`,
  ];
  // A build made with other options (an older version of this file) is made again.
  const stamp = path.join(buildDir, "lectern-cmake-options.json");
  const built = existsSync(stamp) ? readFileSync(stamp, "utf8") : "";
  if (existsSync(tools.server) && existsSync(tools.quantize) && built === JSON.stringify(cmakeOptions))
    return tools;
  mkdirSync(llamaCacheDir, { recursive: true });
  if (!existsSync(path.join(sourceDir, "CMakeLists.txt"))) {
    const bundle = path.join(repoRoot, "node_modules/node-llama-cpp/llama/gitRelease.bundle");
    if (!existsSync(bundle)) throw new Error(`no llama.cpp source: ${bundle} is missing (run npm ci)`);
    log(`cloning llama.cpp from ${path.relative(repoRoot, bundle)} into ${sourceDir}`);
    rmSync(sourceDir, { recursive: true, force: true });
    await run(
      "git",
      ["clone", "--quiet", bundle, sourceDir],
      llamaCacheDir,
      path.join(llamaCacheDir, "clone.log"),
    );
  }
  log(`building llama-server and llama-quantize in ${buildDir} (about 10 minutes on 2 cores)`);
  await run("cmake", ["-B", "build", ...cmakeOptions], sourceDir, path.join(llamaCacheDir, "cmake.log"));
  await run(
    "cmake",
    [
      "--build",
      "build",
      "--config",
      "Release",
      "-j",
      String(os.availableParallelism()),
      "--target",
      "llama-server",
      "llama-quantize",
    ],
    sourceDir,
    path.join(llamaCacheDir, "build.log"),
  );
  writeFileSync(stamp, JSON.stringify(cmakeOptions));
  return tools;
}

/**
 * A Q4_K_M model of `shape` in the cache (random weights, `tokenizerModel`'s vocabulary), made once:
 * the F32 file is written, quantised with llama-quantize, then deleted.
 */
export async function quantizedSyntheticModel(
  tools: LlamaTools,
  tokenizerModel: string,
  shape: SyntheticShape,
  log: (line: string) => void = console.log,
  /** Tokens the model says it was trained on (the synthetic default is 2,048): what a context may hold. */
  contextLength?: number,
): Promise<string> {
  const options = {
    dir: modelsDir,
    plainByteTokens: true,
    ...(contextLength !== undefined && { metadata: { "llama.context_length": contextLength } }),
  };
  const f32Name = syntheticModelName(shape, options);
  const file = path.join(modelsDir, f32Name.replace(/\.gguf$/, "-Q4_K_M.gguf"));
  if (existsSync(file)) return file;
  mkdirSync(modelsDir, { recursive: true });
  log(`writing the F32 model ${f32Name}`);
  const f32 = await syntheticModel(tokenizerModel, shape, options);
  log(`quantising it to Q4_K_M (${(statSync(f32).size / 1024 ** 3).toFixed(2)} GB F32)`);
  const partial = `${file}.partial`;
  await run(tools.quantize, [f32, partial, "Q4_K_M"], modelsDir, path.join(llamaCacheDir, "quantize.log"));
  renameSync(partial, file);
  rmSync(f32);
  return file;
}

/** `f32` quantised to `type` by llama-quantize, once, next to it (`…-<type>.gguf`). */
export async function quantizeFile(tools: LlamaTools, f32: string, type = "Q4_K_M"): Promise<string> {
  const file = f32.replace(/\.gguf$/, `-${type}.gguf`);
  if (existsSync(file)) return file;
  const partial = `${file}.partial`;
  await run(
    tools.quantize,
    [f32, partial, type],
    path.dirname(f32),
    path.join(llamaCacheDir, "quantize.log"),
  );
  renameSync(partial, file);
  return file;
}

/**
 * The model a benchmark runs: Q4_K_M of `shape` (llama-quantize, so `tools` are needed), or for the
 * small shape an F32 file (a run that only checks the script needs no llama.cpp tools).
 */
export async function benchSyntheticModel(
  tools: LlamaTools | undefined,
  tokenizerModel: string,
  shape: SyntheticShape,
  contextLength: number,
): Promise<string> {
  if (shape === SMALL_SHAPE || !tools)
    return syntheticModel(tokenizerModel, shape, {
      dir: modelsDir,
      plainByteTokens: true,
      metadata: { "llama.context_length": contextLength },
    });
  return quantizedSyntheticModel(tools, tokenizerModel, shape, console.log, contextLength);
}
