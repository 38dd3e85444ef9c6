/** Shared settings of the benchmark scripts. */
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const resultsDir = path.join(repoRoot, "bench/results");

/** MODEL_PATH, else LECTERN_TEST_MODEL, else the shared test model. */
export function benchModelPath(): string {
  return (
    process.env.MODEL_PATH ??
    process.env.LECTERN_TEST_MODEL ??
    path.join(repoRoot, "../shared/models/stories260K.gguf")
  );
}

/** A port nobody listens on right now (the kernel's pick for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
