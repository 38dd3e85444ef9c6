/**
 * Small helpers every benchmark script shares: statistics over repeated rounds, the machine
 * description recorded next to each figure, and tables (text and Markdown).
 */
import os from "node:os";

export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/** Linear-interpolated quantile (q in [0, 1]); NaN for an empty list. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.ceil(position);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (position - low);
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length;
}

/** Median with the spread of the trials: the noise of a figure, reported next to it. */
export interface Spread {
  median: number;
  p25: number;
  p75: number;
  min: number;
  max: number;
  /** (p75 - p25) / median: how far apart the middle half of the trials was. */
  relative_iqr: number;
  /** Every trial's value, in the order measured. */
  trials: number[];
}

export function spread(values: readonly number[]): Spread {
  const m = median(values);
  const p25 = quantile(values, 0.25);
  const p75 = quantile(values, 0.75);
  return {
    median: m,
    p25,
    p75,
    min: Math.min(...values),
    max: Math.max(...values),
    relative_iqr: m === 0 ? 0 : (p75 - p25) / m,
    trials: [...values],
  };
}

/** "p25–p75" of a spread, for tables. */
export function iqr(s: Spread): string {
  return `${fmt(s.p25)}–${fmt(s.p75)}`;
}

export interface MachineInfo {
  cpu: string;
  cores: number;
  memory_gib: number;
  os: string;
  node: string;
  /** 1-minute load average when the script started: other work on the machine skews everything. */
  load_average_1m: number;
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? "unknown",
    cores: os.availableParallelism(),
    memory_gib: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    load_average_1m: Math.round(os.loadavg()[0]! * 100) / 100,
  };
}

/** A fixed-width text table; numbers are right-aligned. */
export function textTable(header: string[], rows: Array<Array<string | number>>): string {
  const cells = [header, ...rows.map((row) => row.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? "").length)));
  const numeric = header.map((_, i) =>
    rows.every((row) => typeof row[i] === "number" || /^[\d.,×%≥≤ -]+$/.test(String(row[i]))),
  );
  const line = (row: string[]) =>
    row.map((cell, i) => (numeric[i] ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join("  ");
  return [line(cells[0]!), widths.map((w) => "-".repeat(w)).join("  "), ...cells.slice(1).map(line)].join(
    "\n",
  );
}

/** A Markdown table (the same cells as textTable). */
export function markdownTable(header: string[], rows: Array<Array<string | number>>): string {
  const escape = (cell: string | number) => String(cell).replace(/\|/g, "\\|");
  return [
    `| ${header.map(escape).join(" | ")} |`,
    `| ${header.map(() => "---").join(" | ")} |`,
    ...rows.map((row) => `| ${row.map(escape).join(" | ")} |`),
  ].join("\n");
}

/** Rounds for display: 3 significant digits, at most 2 decimals. */
export function fmt(value: number | undefined | null, digits = 3): string {
  if (value === undefined || value === null || !Number.isFinite(value)) return "–";
  if (Math.abs(value) >= 10 ** digits) return Math.round(value).toLocaleString("en-US");
  return Number(value.toPrecision(digits)).toString();
}
