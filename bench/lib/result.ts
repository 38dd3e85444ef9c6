/**
 * The one result format every benchmark writes to bench/results/<name>.json:
 *
 *   { benchmark, command, date, machine, rows: [{ metric, value, reference, ratio, target, held }], details }
 *
 * `rows` are the figures the report shows, already formatted (ours, the reference measured in the same run,
 * their ratio, the target and whether it held); `details` keeps every measurement the rows were taken from
 * (trials, spreads, per-level figures) for the detail sections and plots of docs/BENCHMARKS.md.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { resultsDir } from "./bench-env.js";
import { machineInfo } from "./report.js";
import { rowsOf } from "./summary-rows.js";

export interface ResultRow {
  metric: string;
  /** Ours, formatted for the report. */
  value: string;
  /** The reference measured in the same run ("" where there is none). */
  reference: string;
  ratio: string;
  target: string;
  /** Whether the target held; absent where there is no target. */
  held?: boolean;
  /** Which part of the command's run measured it, where it has several. */
  parts?: string;
}

export type Details = Record<string, unknown>;

export interface BenchResult {
  benchmark: string;
  command: string;
  /** ISO date of the run; null in results older than the format that did not record it. */
  date: string | null;
  /** The machine (bench/lib/report.ts machineInfo); null where an old result did not record it. */
  machine: Record<string, unknown> | null;
  rows: ResultRow[];
  details: Details;
}

/** Writes bench/results/<name>.json, its rows taken from the details by bench/lib/summary-rows.ts. */
export function writeResult(name: string, command: string, details: Details): string {
  mkdirSync(resultsDir, { recursive: true });
  const file = path.join(resultsDir, `${name}.json`);
  const result: BenchResult = {
    benchmark: name,
    command,
    date: new Date().toISOString(),
    machine: { ...machineInfo() },
    rows: rowsOf(name, details),
    details,
  };
  writeFileSync(file, JSON.stringify(result, null, 2) + "\n");
  return file;
}

/** bench/results/<name>.json (or under `dir`), or null when it is missing or not in the format. */
export function readResult(name: string, dir: string = resultsDir): BenchResult | null {
  const file = path.join(dir, `${name}.json`);
  if (!existsSync(file)) return null;
  try {
    const result = JSON.parse(readFileSync(file, "utf8")) as Partial<BenchResult>;
    return Array.isArray(result.rows) && result.details ? (result as BenchResult) : null;
  } catch {
    return null;
  }
}
