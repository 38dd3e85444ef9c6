/** Figures of a soak run: requests by route and status, latencies, and memory samples. */

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

export interface RouteFigures {
  route: string;
  requests: number;
  statuses: Record<string, number>;
  errors: number;
  p50: number;
  p99: number;
  max: number;
}

/** Per route: status counts (and transport errors) and latencies in ms. */
export class Recorder {
  private readonly routes = new Map<
    string,
    { statuses: Map<string, number>; latencies: number[]; errors: number }
  >();
  readonly errorSamples: string[] = [];

  private entry(route: string) {
    let entry = this.routes.get(route);
    if (!entry) {
      entry = { statuses: new Map(), latencies: [], errors: 0 };
      this.routes.set(route, entry);
    }
    return entry;
  }

  record(route: string, status: number, ms: number): void {
    const entry = this.entry(route);
    entry.statuses.set(String(status), (entry.statuses.get(String(status)) ?? 0) + 1);
    entry.latencies.push(ms);
  }

  /** A request that got no HTTP response (refused, reset, timed out). */
  error(route: string, error: unknown): void {
    const entry = this.entry(route);
    entry.errors++;
    entry.statuses.set("error", (entry.statuses.get("error") ?? 0) + 1);
    if (this.errorSamples.length < 20) this.errorSamples.push(`${route}: ${String(error)}`);
  }

  figures(): RouteFigures[] {
    return [...this.routes].map(([route, { statuses, latencies, errors }]) => {
      const sorted = [...latencies].sort((a, b) => a - b);
      return {
        route,
        requests: latencies.length + errors,
        statuses: Object.fromEntries([...statuses].sort()),
        errors,
        p50: round(percentile(sorted, 50)),
        p99: round(percentile(sorted, 99)),
        max: round(sorted[sorted.length - 1] ?? 0),
      };
    });
  }

  count(predicate: (status: string) => boolean): number {
    let total = 0;
    for (const { statuses } of this.routes.values()) {
      for (const [status, n] of statuses) if (predicate(status)) total += n;
    }
    return total;
  }
}

export const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

export interface RssSample {
  /** Seconds since the load started. */
  t: number;
  bytes: number;
}

export interface RssSummary {
  samples: number;
  startMiB: number;
  midMiB: number;
  endMiB: number;
  minMiB: number;
  maxMiB: number;
  /** Growth from the start of the second half to the end, in percent. */
  lastHalfGrowthPct: number;
  /** A coarse series, one value every `step` seconds, in MiB. */
  series: Array<[number, number]>;
  /** RSS right after a full collection, at sixths of the run, in MiB. */
  postGc: Array<[number, number]>;
  /** Post-collection growth from the middle of the run to its end, in percent. */
  postGcLastHalfGrowthPct: number;
}

const mib = (bytes: number) => round(bytes / (1024 * 1024));

/** Median of the samples within `window` seconds after (or before, for the end) a point. */
function around(samples: RssSample[], from: number, to: number): number {
  const values = samples.filter((s) => s.t >= from && s.t <= to).map((s) => s.bytes);
  if (values.length === 0) return samples[samples.length - 1]?.bytes ?? 0;
  values.sort((a, b) => a - b);
  return values[Math.floor(values.length / 2)]!;
}

/**
 * RSS over the run. The growth over the last half compares the median of the first 3 s of the second
 * half with the median of the last 3 s, so that one sample's garbage-collection swing does not count.
 */
export function summariseRss(
  samples: RssSample[],
  postGc: RssSample[],
  seconds: number,
  step = 5,
): RssSummary {
  const bytes = samples.map((s) => s.bytes);
  const half = seconds / 2;
  const mid = around(samples, half, half + 3);
  const end = around(samples, seconds - 3, seconds + 1);
  const series: Array<[number, number]> = [];
  for (let t = 0; t <= seconds; t += step) {
    const sample = samples.find((s) => s.t >= t);
    if (sample) series.push([t, mib(sample.bytes)]);
  }
  return {
    samples: samples.length,
    startMiB: mib(samples[0]?.bytes ?? 0),
    midMiB: mib(mid),
    endMiB: mib(end),
    minMiB: mib(Math.min(...bytes)),
    maxMiB: mib(Math.max(...bytes)),
    lastHalfGrowthPct: mid > 0 ? round(((end - mid) / mid) * 100, 2) : 0,
    series,
    postGc: postGc.map((s) => [round(s.t, 0), mib(s.bytes)]),
    postGcLastHalfGrowthPct: postGcGrowth(postGc, seconds),
  };
}

/** Growth of the post-collection RSS from the sample at the middle of the run to the last one. */
function postGcGrowth(postGc: RssSample[], seconds: number): number {
  if (postGc.length < 2) return 0;
  const mid = postGc.reduce((best, s) =>
    Math.abs(s.t - seconds / 2) < Math.abs(best.t - seconds / 2) ? s : best,
  );
  const end = postGc[postGc.length - 1]!;
  return mid.bytes > 0 ? round(((end.bytes - mid.bytes) / mid.bytes) * 100, 2) : 0;
}
