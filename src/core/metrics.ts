/**
 * Prometheus metrics (prom-client), one registry per app so two apps in one process do not mix.
 * HTTP request counts and latency by method, route and status come from one per-request callback;
 * each app adds its own metrics.
 *
 * That callback runs on every request, so it does as little as it can: it finds the request's series in
 * nested maps and adds to plain numbers, which become prom-client's figures only when /metrics is read.
 * prom-client's own inc() and observe() hash their labels and allocate on every call, which cost more
 * than everything else the callback does.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Counter, type Histogram, Registry, collectDefaultMetrics } from "prom-client";

export interface AppMetrics {
  registry: Registry;
}

type Labels = { method: string; route: string; status: string };

const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** One (method, route, status) series. */
interface Series {
  labels: Labels;
  /** Requests since the request counter was last read. */
  unreported: number;
  /** Latencies per bucket, not cumulative; the last one counts those above the largest bound. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * lectern_http_request_duration_seconds: a histogram kept as plain numbers per series. It answers the
 * registry as a prom-client histogram does (name, get(), reset()), with the same series and figures.
 */
class DurationHistogram {
  readonly name = "lectern_http_request_duration_seconds";
  readonly help = "HTTP request latency, by method, route and status";
  readonly type = "histogram";
  readonly aggregator = "sum";

  constructor(
    private readonly bounds: readonly number[],
    private readonly series: readonly Series[],
  ) {}

  observe(series: Series, seconds: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]!) i++;
    series.buckets[i]!++;
    series.sum += seconds;
    series.count++;
  }

  async get() {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    for (const s of this.series) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += s.buckets[i]!;
        values.push({ labels: { le, ...s.labels }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { le: "+Inf", ...s.labels }, value: s.count, metricName: `${this.name}_bucket` });
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    for (const s of this.series) {
      s.buckets.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}

export function registerMetrics(app: FastifyInstance, service: string): AppMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry, prefix: "lectern_" });
  // These three are gauges named "_total", which Prometheus' linter (promtool) rejects.
  for (const name of [
    "nodejs_active_handles_total",
    "nodejs_active_requests_total",
    "nodejs_active_resources_total",
  ]) {
    registry.removeSingleMetric(`lectern_${name}`);
  }

  const all: Series[] = [];
  new Counter({
    name: "lectern_http_requests_total",
    help: "HTTP requests answered, by method, route and status",
    labelNames: ["method", "route", "status"],
    registers: [registry],
    collect() {
      for (const s of all) {
        if (s.unreported > 0) this.inc(s.labels, s.unreported);
        s.unreported = 0;
      }
    },
  });
  const duration = new DurationHistogram(DURATION_BUCKETS, all);
  // The registry reads a metric through name, get() and reset() only; this one has those.
  registry.registerMetric(duration as unknown as Histogram);

  // route → method → status → series: a request finds its series without building a key or labels.
  const byRoute = new Map<string, Map<string, Map<number, Series>>>();
  function seriesOf(route: string, method: string, status: number): Series {
    let byMethod = byRoute.get(route);
    if (byMethod === undefined) byRoute.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
    let series = byStatus.get(status);
    if (series === undefined) {
      series = {
        labels: { method, route, status: String(status) },
        unreported: 0,
        buckets: new Float64Array(DURATION_BUCKETS.length + 1),
        sum: 0,
        count: 0,
      };
      byStatus.set(status, series);
      all.push(series);
    }
    return series;
  }
  const record = (request: FastifyRequest, reply: FastifyReply): void => {
    // The route pattern, not the URL, keeps label cardinality bounded.
    const series = seriesOf(request.routeOptions.url ?? "unmatched", request.method, reply.statusCode);
    series.unreported++;
    // Fastify has timed the request already; no clock is read here.
    duration.observe(series, reply.elapsedTime / 1000);
  };
  // Apps built by createHttpApp tell of each completed request without a hook run; others get a hook.
  if (app.onRequestCompleted) app.onRequestCompleted(record);
  else
    app.addHook("onResponse", (request, reply, done) => {
      record(request, reply);
      done();
    });
  app.get(
    "/metrics",
    { schema: { tags: ["service"], summary: "Prometheus metrics" } },
    async (_request, reply) => {
      void reply.type(registry.contentType);
      return registry.metrics();
    },
  );
  return { registry };
}
