/**
 * Prometheus metrics (prom-client), one registry per app so two apps in one process do not mix.
 * HTTP request counts and latency by route and status come from one hook; each app adds its own.
 */
import type { FastifyInstance } from "fastify";
import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export interface AppMetrics {
  registry: Registry;
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
  const requests = new Counter({
    name: "lectern_http_requests_total",
    help: "HTTP requests answered, by method, route and status",
    labelNames: ["method", "route", "status"],
    registers: [registry],
  });
  const duration = new Histogram({
    name: "lectern_http_request_duration_seconds",
    help: "HTTP request latency, by method, route and status",
    labelNames: ["method", "route", "status"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  app.addHook("onResponse", async (request, reply) => {
    // The route pattern, not the URL, keeps label cardinality bounded.
    const route = request.routeOptions.url ?? "unmatched";
    const labels = { method: request.method, route, status: String(reply.statusCode) };
    requests.inc(labels);
    duration.observe(labels, reply.elapsedTime / 1000);
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
