/**
 * Which llama.cpp binary the app loads, and how it says so at start-up.
 *
 * node-llama-cpp ships a prebuilt binary with a CPU variant per instruction set. It has no OpenMP:
 * its worker threads wait for each other at every step of the graph by spinning, and on a machine
 * whose cores are shared with other work, a thread spinning for a peer that is not running burns its
 * whole time slice. bench/llama-server.ts measured it on a busy 2-core machine: 2 threads decoding a
 * 0.5B-shaped model at 0.3 tokens/s with the prebuilt binary, 10 with one thread. llama.cpp's own
 * server, built with OpenMP, yields instead. `npm run build:native` builds node-llama-cpp from its
 * bundled llama.cpp source for this CPU (GGML_NATIVE, OpenMP when the compiler has it) into
 * node_modules/node-llama-cpp/llama/localBuilds; `getLlama` finds that build by its CMake options
 * and falls back to the prebuilt binary when there is none.
 */
import { getLlama, LlamaLogLevel, type Llama } from "node-llama-cpp";

/**
 * The CMake options of `npm run build:native` (keep in step with scripts/build-native.mjs). AMX is
 * left out: on a Sapphire Rapids machine here, llama-server built from the same source with
 * -march=native and OpenMP stopped on an illegal instruction (tilezero, in llama.cpp's AMX matrix
 * kernel) in its warm-up on the 0.5B-shaped Q4_K_M model, and so did this build with AMX (the first
 * decode); without AMX both run. The prebuilt binary, without OpenMP, runs its AMX kernels there.
 */
// CMake's release flags plus AMX off; in the _RELEASE variables because cmake-js sets CMAKE_CXX_FLAGS.
const RELEASE_FLAGS = "-O3 -DNDEBUG -mno-amx-tile -mno-amx-int8 -mno-amx-bf16";
export const NATIVE_BUILD_CMAKE_OPTIONS: Readonly<Record<string, string>> = {
  GGML_NATIVE: "ON",
  CMAKE_C_FLAGS_RELEASE: RELEASE_FLAGS,
  CMAKE_CXX_FLAGS_RELEASE: RELEASE_FLAGS,
};

export type LlamaBinaryChoice = "auto" | "prebuilt";

/** getLlama's cmakeOptions for `choice`: the native build's when it may be used. */
export function cmakeOptionsFor(choice: LlamaBinaryChoice): Record<string, string> | undefined {
  return choice === "auto" ? { ...NATIVE_BUILD_CMAKE_OPTIONS } : undefined;
}

/** One line for the start-up log: which llama.cpp release and binary, and with which threading. */
export function describeBinary(llama: Llama): string {
  const openMp = /\bOPENMP = 1\b/.test(llama.systemInfo);
  const what =
    llama.buildType === "localBuild"
      ? "the build for this CPU (npm run build:native)"
      : "the prebuilt binary";
  const advice =
    !openMp && llama.gpu === false
      ? "; its threads spin while they wait, which costs much on a CPU shared with other work: " +
        "`npm run build:native` makes a build with OpenMP"
      : "";
  // The release the loaded binary was built from, as its build metadata records it (llama.cpp's own
  // tag, e.g. v0.4.0: llama.cpp moved from bNNNN build tags to versions), not node-llama-cpp's.
  const { repo, release } = llama.llamaCppRelease;
  return `llama.cpp ${release} (${repo}): ${what}, ${openMp ? "OpenMP threads" : "no OpenMP"}, GPU ${llama.gpu === false ? "off" : llama.gpu}${advice}`;
}

const sharedInstances = new Map<string, Promise<Llama>>();

/**
 * The one `Llama` (node-llama-cpp's handle on the llama.cpp backend) for these options, shared by
 * every model loaded with them and never disposed (node-llama-cpp disposes it before the process
 * exits). Each `getLlama` call initializes the native addon again and registers its classes anew,
 * which V8 never frees: one per model load held on to ~85 KB of JS heap (bench/models.ts). A failed
 * start is forgotten, so the next load tries again.
 */
export function sharedLlama(options: {
  gpu: "auto" | false;
  cmakeOptions?: Record<string, string>;
}): Promise<Llama> {
  const key = JSON.stringify([options.gpu, options.cmakeOptions ?? null]);
  let llama = sharedInstances.get(key);
  if (!llama) {
    // build: "never": the llama.cpp binary ships prebuilt in the npm package, or `npm run
    // build:native` made one before; never compile or download one at run time.
    llama = getLlama({ build: "never", logLevel: LlamaLogLevel.error, ...options });
    sharedInstances.set(key, llama);
    llama.catch(() => sharedInstances.delete(key));
  }
  return llama;
}
