/**
 * Where the main thread's time went, from a V8 CPU profile (`node --cpu-prof`): self time by function
 * and by package (node_modules/<name>, src/, node: internals, idle, GC).
 *
 *   node --import tsx bench/lib/cpuprofile-summary.ts <file.cpuprofile> [--top 25]
 */
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  totalMs: number;
  byPackage: Array<{ name: string; ms: number; share: number }>;
  byFunction: Array<{ name: string; where: string; ms: number; share: number }>;
}

/** Groups a script URL: a package under node_modules, the project's own folders, or node internals. */
export function packageOf(url: string, functionName: string): string {
  if (url === "") return functionName.startsWith("(") ? functionName : "(native)";
  if (url.startsWith("node:")) return "node:internals";
  const modules = url.lastIndexOf("node_modules/");
  if (modules >= 0) {
    const rest = url.slice(modules + "node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const match = /\/(src|bench|test)\/(.*)$/.exec(url);
  if (match) return `${match[1]}/${match[2]!.split("/")[0]}`;
  return url;
}

export function summarize(profile: CpuProfile, top = 25): ProfileSummary {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const totalUs = profile.timeDeltas.reduce((a, b) => a + b, 0);
  const packages = new Map<string, number>();
  const functions = new Map<string, { where: string; us: number }>();
  for (const [id, us] of selfUs) {
    const { functionName, url, lineNumber } = nodes.get(id)!.callFrame;
    const pkg = packageOf(url, functionName);
    packages.set(pkg, (packages.get(pkg) ?? 0) + us);
    const name = functionName || "(anonymous)";
    const where = url
      ? `${url.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*?\/(src|bench)\//, "$1/")}:${lineNumber + 1}`
      : "";
    const key = `${name} ${where}`;
    const entry = functions.get(key) ?? { where, us: 0 };
    entry.us += us;
    functions.set(key, entry);
  }
  const share = (us: number) => Math.round((us / totalUs) * 1000) / 10;
  return {
    totalMs: Math.round(totalUs / 1000),
    byPackage: [...packages]
      .sort((a, b) => b[1] - a[1])
      .map(([name, us]) => ({ name, ms: Math.round(us / 1000), share: share(us) })),
    byFunction: [...functions]
      .sort((a, b) => b[1].us - a[1].us)
      .slice(0, top)
      .map(([key, { where, us }]) => ({
        name: key.split(" ")[0]!,
        where,
        ms: Math.round(us / 1000),
        share: share(us),
      })),
  };
}

/** Prints where a profile's time went (`bench/generation.ts --profile` does it for the server's profile). */
export function printProfileSummary(file: string, top = 25): void {
  const summary = summarize(JSON.parse(readFileSync(file, "utf8")) as CpuProfile, top);
  console.log(`\n${file}: ${summary.totalMs} ms sampled`);
  console.log("by package:");
  for (const p of summary.byPackage.slice(0, 15))
    console.log(`  ${String(p.share).padStart(5)}%  ${p.ms} ms  ${p.name}`);
  console.log("by function (self time):");
  for (const f of summary.byFunction)
    console.log(`  ${String(f.share).padStart(5)}%  ${f.ms} ms  ${f.name}  ${f.where}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { values, positionals } = parseArgs({ options: { top: { type: "string" } }, allowPositionals: true });
  for (const file of positionals) printProfileSummary(file, Number(values.top ?? 25));
}
