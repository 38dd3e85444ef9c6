/**
 * The Lucene reference of bench/segments.ts: finds javac and Debian's Lucene 8 jars (liblucene8-java,
 * under /usr/share/java), installs them with apt-get when missing and running as root, compiles
 * bench/lucene/LuceneBench.java into bench/results/tmp/lucene-classes (ignored by git), and runs it.
 * The harness prints one JSON object (LuceneResult).
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { repoRoot, resultsDir } from "./bench-env.js";

const JAVA_DIR = "/usr/share/java";
const SOURCE = path.join(repoRoot, "bench/lucene/LuceneBench.java");
const CLASSES = path.join(resultsDir, "tmp/lucene-classes");
const APT_PACKAGES = ["liblucene8-java", "default-jdk-headless"];

export interface LuceneLatency {
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  count: number;
}

export interface LuceneResult {
  lucene: string;
  java: string;
  maxHeapMB: number;
  directory: string;
  analyzer: string;
  similarity: string;
  ramBufferMB: number;
  documents: number;
  indexMs: number;
  /** Indexing, commit, and the background merges it started until they ended. */
  mergesSettledMs: number;
  segmentsAfterIndexing: number;
  indexBytes: number;
  queries: number;
  query: LuceneLatency;
  nrtAddReopen: LuceneLatency;
  nrtDeleteReopen: LuceneLatency;
  addCommit: LuceneLatency;
  segmentsAtEnd: number;
  hitsReturned: number;
  heapUsedMB: number;
}

/** Lucene's jars as Debian names them (unversioned links preferred): core and the common analyzers. */
function findJars(): string[] | null {
  if (!existsSync(JAVA_DIR)) return null;
  const files = readdirSync(JAVA_DIR).filter((f) => f.endsWith(".jar"));
  const pick = (pattern: RegExp): string | undefined =>
    files.filter((f) => pattern.test(f)).sort((a, b) => a.length - b.length)[0];
  const core = pick(/^lucene\d*-core(-[\d.]+)?\.jar$/);
  const analyzers = pick(/^lucene\d*-analy(zers|sis)-common(-[\d.]+)?\.jar$/);
  return core && analyzers ? [core, analyzers].map((f) => path.join(JAVA_DIR, f)) : null;
}

const hasCommand = (command: string): boolean => spawnSync(command, ["-version"]).status === 0;

/**
 * The classpath to run LuceneBench with (its classes compiled and up to date), or an error message
 * saying what is missing and how to get it.
 */
export function prepareLucene(log: (message: string) => void): { classpath: string } | { error: string } {
  let jars = findJars();
  if (!jars || !hasCommand("javac") || !hasCommand("java")) {
    const install = `apt-get install -y --no-install-recommends ${APT_PACKAGES.join(" ")}`;
    if (process.getuid?.() !== 0) return { error: `Lucene or a JDK is missing: run \`${install}\` as root` };
    log(`installing ${APT_PACKAGES.join(" ")} (apt-get)…`);
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    let result = spawnSync("apt-get", ["install", "-y", "-q", "--no-install-recommends", ...APT_PACKAGES], {
      env,
      stdio: ["ignore", "ignore", "inherit"],
    });
    if (result.status !== 0) {
      // The package lists may be stale or empty (a fresh container): refresh them once.
      spawnSync("apt-get", ["update", "-qq"], { env, stdio: ["ignore", "ignore", "inherit"] });
      result = spawnSync("apt-get", ["install", "-y", "-q", "--no-install-recommends", ...APT_PACKAGES], {
        env,
        stdio: ["ignore", "ignore", "inherit"],
      });
    }
    jars = findJars();
    if (result.status !== 0 || !jars || !hasCommand("javac"))
      return { error: `\`${install}\` failed; the Lucene reference is skipped` };
  }
  const classFile = path.join(CLASSES, "LuceneBench.class");
  const stale = !existsSync(classFile) || statSync(classFile).mtimeMs < statSync(SOURCE).mtimeMs;
  if (stale) {
    mkdirSync(CLASSES, { recursive: true });
    const compiled = spawnSync(
      "javac",
      ["-nowarn", "-encoding", "UTF-8", "-cp", jars.join(":"), "-d", CLASSES, SOURCE],
      {
        encoding: "utf8",
      },
    );
    if (compiled.status !== 0) return { error: `javac failed: ${compiled.stderr.slice(0, 2000)}` };
  }
  return { classpath: [...jars, CLASSES].join(":") };
}

export interface LuceneRun {
  corpusFile: string;
  queriesFile: string;
  addsFile: string;
  indexDir: string;
  heapMB: number;
  nrtSamples: number;
}

/** Runs the harness; resolves with its JSON, rejects with its exit code and the end of its stderr. */
export function runLucene(classpath: string, run: LuceneRun): Promise<LuceneResult> {
  const args = [
    `-Xmx${run.heapMB}m`,
    `-Xms${Math.min(run.heapMB, 512)}m`,
    "-cp",
    classpath,
    "LuceneBench",
    run.corpusFile,
    run.queriesFile,
    run.addsFile,
    run.indexDir,
    "--nrt-samples",
    String(run.nrtSamples),
  ];
  return new Promise((resolve, reject) => {
    const child = spawn("java", args, { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      const last = out.trim().split("\n").pop() ?? "";
      if (code !== 0) return reject(new Error(`LuceneBench exited ${code}: ${err.slice(-1500)}`));
      try {
        resolve(JSON.parse(last) as LuceneResult);
      } catch {
        reject(new Error(`LuceneBench printed no JSON: ${last.slice(0, 300)}`));
      }
    });
  });
}
