/** docs/RELIABILITY.md: what the reliability suites check, and the figures of the last soak run. */
import type { RouteFigures, RssSummary } from "./soak-stats.js";

export interface Check {
  name: string;
  pass: boolean;
  detail: string;
}

export interface SoakReport {
  command: string;
  date: string;
  machine: string;
  seconds: number;
  connections: number;
  predictClients: number;
  routes: RouteFigures[];
  rss: { rag: RssSummary; textgen: RssSummary };
  checks: Check[];
  writes: { acknowledgedDocuments: number; found: number; lost: number; builds: number };
  notes: string[];
}

const table = (header: string[], rows: Array<Array<string | number>>) =>
  [
    `| ${header.join(" | ")} |`,
    `| ${header.map(() => "---").join(" | ")} |`,
    ...rows.map((row) => `| ${row.join(" | ")} |`),
  ].join("\n");

export function renderReport(report: SoakReport): string {
  const passed = report.checks.every((c) => c.pass);
  const requests = report.routes.reduce((sum, r) => sum + r.requests, 0);
  const routeRows = report.routes.map((r) => [
    `\`${r.route}\``,
    r.requests,
    Object.entries(r.statuses)
      .map(([status, n]) => `${status}: ${n}`)
      .join(", "),
    r.p50,
    r.p99,
    r.max,
  ]);
  const rssRows = (["rag", "textgen"] as const).map((app) => {
    const s = report.rss[app];
    return [
      app,
      s.samples,
      s.startMiB,
      s.midMiB,
      s.endMiB,
      s.minMiB,
      s.maxMiB,
      `${s.lastHalfGrowthPct} %`,
      s.postGc.map(([t, v]) => `${t}s ${v}`).join(", "),
      `**${s.postGcLastHalfGrowthPct} %**`,
    ];
  });
  const series = (["rag", "textgen"] as const)
    .map((app) => `- ${app}: ${report.rss[app].series.map(([t, v]) => `${t}s ${v}`).join(" · ")}`)
    .join("\n");
  return `# Reliability

Lectern must keep working whatever it is fed, lose nothing it acknowledged, and stay within its memory.
Four kinds of tests show it; the figures at the end come from the last soak run and are rewritten by it.

## What is tested

| suite | file | what it shows |
| --- | --- | --- |
| fuzzing | \`test/fuzz/rag.fuzz.test.ts\`, \`test/fuzz/textgen.fuzz.test.ts\` | fast-check sends ≥ 5,000 generated requests to every route of both apps (valid, boundary, wrong types, huge, 10,000-level and deeper JSON, invalid UTF-8, random bytes, random content types, query strings and path segments with \`../\`, \`%00\` and unicode, raw paths on a real socket): never a 5xx, every 4xx is the contract's JSON error (OpenAI's shape on \`/v1\`), no stack trace or server path in any body; afterwards \`/health\` answers and the indices built before answer exactly as before. \`FUZZ_SEED\` (default fixed, or \`random\`) and \`FUZZ_RUNS\` (default 5,000) vary a run. Bugs it found and that are not fixed yet are masked by narrow predicates and listed as \`todo\` tests. |
| crash safety | \`test/rag/crash.test.ts\`, \`test/reliability/crash-append-delete.test.ts\` | a child process running the RAG app is SIGKILLed during a build (at fractions of its write transaction), an append, the delete of an index and the delete of one document (it kills itself after an exact SQLite statement of the transaction: the first, the one before COMMIT, and right after the commit, so the points do not depend on the machine's load); a new app on the same \`DATA_DIR\` sees each index exactly as before (uncommitted) or exactly as after (committed, even if unanswered), never a mix; other indices are untouched; the store passes \`PRAGMA integrity_check\`. |
| graceful shutdown | \`test/reliability/shutdown.test.ts\` | \`serve.ts textgen\` and \`serve.ts rag\` get SIGTERM with requests in flight: new connections are refused, in-flight generations (plain and streamed) and builds complete, or past \`SHUTDOWN_GRACE_MS\` end with a 503 / an \`error\` event on a properly closed stream; the process exits 0 within 15 s and the SQLite store reopens cleanly. |
| soak | \`scripts/soak.ts\` (\`npm run soak\`) | both apps as child processes on loopback, ${report.connections} connections mixing RAG queries, replace builds and appends, and ${report.predictClients} clients looping \`/predict\`, for a bounded time; checks zero 5xx, zero lost writes (every acknowledged document found by its unique word, counts equal), and RSS growth under 10 % over the last half of the run (after a full GC). |

## Last soak run

- Command: \`${report.command}\`
- Date: ${report.date}
- Machine: ${report.machine}
- Load: ${report.connections} RAG connections and ${report.predictClients} \`/predict\` clients for ${report.seconds} s; ${requests} requests in all
- Result: **${passed ? "PASS" : "FAIL"}**

### Checks

${table(
  ["check", "result", "detail"],
  report.checks.map((c) => [c.name, c.pass ? "pass" : "**FAIL**", c.detail]),
)}

### Requests by route and status (latency in ms)

${table(["route", "requests", "statuses", "p50", "p99", "max"], routeRows)}

Writes: ${report.writes.acknowledgedDocuments} documents acknowledged by appends, ${report.writes.found} found afterwards, ${report.writes.lost} lost; ${report.writes.builds} replace builds acknowledged.

### Resident memory (MiB, from /proc/<pid>/status VmRSS)

Raw RSS is sampled every second. V8 collects garbage lazily: under load a process's RSS climbs for a
minute or two and then falls back, so the growth of raw RSS over 30 s mostly shows when the collector
last ran. The memory check therefore uses RSS taken right after a full collection (asked for through
each child's inspector on loopback, at sixths of the run): its growth from the middle of the run to
the end must stay under 10 %.

${table(
  [
    "app",
    "raw samples",
    "raw start",
    "raw mid",
    "raw end",
    "raw min",
    "raw max",
    "raw growth, last half",
    "after a full GC (t: MiB)",
    "growth after GC, last half",
  ],
  rssRows,
)}

Raw series:

${series}
${report.notes.length > 0 ? `\n### Notes\n\n${report.notes.map((n) => `- ${n}`).join("\n")}\n` : ""}`;
}
