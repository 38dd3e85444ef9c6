#!/usr/bin/env node
/**
 * `npm run build:native`: builds node-llama-cpp's llama.cpp binding from the llama.cpp source bundled
 * in the package, for this CPU (GGML_NATIVE=ON; OpenMP threads when the compiler has OpenMP), into
 * node_modules/node-llama-cpp/llama/localBuilds. The app loads it instead of the prebuilt binary
 * (src/textgen/engine/llama-binary.ts says why that matters on a CPU shared with other work) and says which
 * one it runs at start-up. Needs cmake and a C++ compiler; about 10 minutes on 2 cores.
 *
 * `node scripts/build-native.mjs --if-requested` (npm's postinstall) builds only when
 * LECTERN_NATIVE_BUILD=1, so `LECTERN_NATIVE_BUILD=1 npm ci` installs and builds in one go; a failed
 * build then warns and leaves the prebuilt binary in use rather than failing the install.
 *
 * Plain JavaScript: it runs at install time, when dev dependencies (tsx) may be absent.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

// The same flags as NATIVE_BUILD_CMAKE_OPTIONS in src/textgen/engine/llama-binary.ts: CMake's release
// flags plus AMX off (cmake-js sets CMAKE_CXX_FLAGS itself, so they go in the _RELEASE ones).
const RELEASE_FLAGS = "-O3 -DNDEBUG -mno-amx-tile -mno-amx-int8 -mno-amx-bf16";
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ifRequested = process.argv.includes("--if-requested");
if (ifRequested && process.env.LECTERN_NATIVE_BUILD !== "1") process.exit(0);

const packageDir = path.join(repoRoot, "node_modules/node-llama-cpp");
const cli = path.join(packageDir, "dist/cli/cli.js");
if (!existsSync(cli)) {
  console.error("build-native: node-llama-cpp is not installed (run npm ci first)");
  process.exit(ifRequested ? 0 : 1);
}
// `source download` clones the bundled release (no network) and builds; `source build` rebuilds a
// clone that is already there.
const cloned = existsSync(path.join(packageDir, "llama/llama.cpp/CMakeLists.txt"));
const args = [cli, "source", cloned ? "build" : "download", "--gpu", "false", "--noUsageExample"];
console.log(`build-native: node ${args.map((a) => path.relative(repoRoot, a) || a).join(" ")}`);
const result = spawnSync(process.execPath, args, {
  cwd: repoRoot,
  stdio: "inherit",
  // Keep in step with NATIVE_BUILD_CMAKE_OPTIONS in src/textgen/engine/llama-binary.ts: the app finds the
  // build by these options.
  env: {
    ...process.env,
    NODE_LLAMA_CPP_CMAKE_OPTION_GGML_NATIVE: "ON",
    // This CPU's instructions but AMX: llama.cpp's AMX kernels with OpenMP threads stop on an
    // illegal instruction on Sapphire Rapids machines (src/textgen/engine/llama-binary.ts).
    NODE_LLAMA_CPP_CMAKE_OPTION_CMAKE_C_FLAGS_RELEASE: RELEASE_FLAGS,
    NODE_LLAMA_CPP_CMAKE_OPTION_CMAKE_CXX_FLAGS_RELEASE: RELEASE_FLAGS,
  },
});
if (result.status !== 0) {
  console.error(`build-native: the build failed (exit ${result.status}); the prebuilt binary stays in use`);
  process.exit(ifRequested ? 0 : 1);
}
console.log("build-native: done; the app now starts with the build for this CPU");
