/** Shared pieces of the RAG HTTP tests: temp folders, an app on them, and reply checks. */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { LightMyRequestResponse } from "fastify";
import { buildRagApp } from "../../src/rag/app.js";
import { testConfig } from "./env.js";

export type RagApp = Awaited<ReturnType<typeof buildRagApp>>;
export type Reply = LightMyRequestResponse;

/** Temp folders made by `makeTempDir`, removed by `removeTempDirs`. */
const made: string[] = [];

export function makeTempDir(label: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `lectern-${label}-`));
  made.push(dir);
  return dir;
}

export function removeTempDirs(): void {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
}

/** The RAG app on `dataDir` (a new temp folder when omitted), with its own SQLite store. */
export async function openRagApp(
  env: Record<string, string> = {},
): Promise<{ app: RagApp; dataDir: string }> {
  const dataDir = env.DATA_DIR ?? makeTempDir("rag-data");
  const app = await buildRagApp({ config: testConfig({ ...env, DATA_DIR: dataDir }) });
  return { app, dataDir };
}

/** Request helpers over `app.inject`; bodies may be objects or raw strings (sent as JSON). */
export function ragClient(app: RagApp) {
  const send = (method: "GET" | "POST" | "DELETE", url: string, payload?: unknown) =>
    app.inject({
      method,
      url,
      ...(payload === undefined
        ? {}
        : {
            payload: typeof payload === "string" ? payload : JSON.stringify(payload),
            headers: { "content-type": "application/json" },
          }),
    });
  return {
    build: (body: unknown) => send("POST", "/rag/build", body),
    query: (body: unknown) => send("POST", "/rag/query", body),
    indices: (tenant?: string) =>
      send("GET", tenant === undefined ? "/rag/indices" : `/rag/indices?tenant_id=${tenant}`),
    stats: () => send("GET", "/rag/stats"),
    indexStats: (name: string, tenant?: string) =>
      send("GET", `/rag/stats/${name}${tenant === undefined ? "" : `?tenant_id=${tenant}`}`),
    deleteIndex: (name: string, query = "") => send("DELETE", `/rag/indices/${name}${query}`),
    addDocuments: (name: string, body: unknown) => send("POST", `/rag/indices/${name}/documents`, body),
    deleteDocument: (name: string, id: string, query = "") =>
      send("DELETE", `/rag/indices/${name}/documents/${encodeURIComponent(id)}${query}`),
    send,
  };
}
export type RagClient = ReturnType<typeof ragClient>;

/** Asserts the status, with the body in the message when it differs. */
export function assertStatus(res: Reply, status: number): void {
  assert.equal(
    res.statusCode,
    status,
    `expected ${status}, got ${res.statusCode}: ${res.body.slice(0, 500)}`,
  );
}

/**
 * Asserts a contract error: a 4xx (or exactly `status`), JSON `{"error":{"code","message","details":[]}}`
 * and no stack trace.
 */
export function assertApiError(res: Reply, status?: number): { code: string; message: string } {
  if (status === undefined) {
    assert.ok(
      res.statusCode >= 400 && res.statusCode < 500,
      `expected a 4xx, got ${res.statusCode}: ${res.body}`,
    );
  } else {
    assertStatus(res, status);
  }
  assert.match(String(res.headers["content-type"]), /^application\/json/);
  const body = res.json() as { error?: { code?: unknown; message?: unknown; details?: unknown } };
  assert.ok(body.error && typeof body.error === "object", `no "error" object: ${res.body}`);
  assert.deepEqual(Object.keys(body.error).sort(), ["code", "details", "message"], res.body);
  assert.equal(typeof body.error.code, "string");
  assert.ok((body.error.code as string).length > 0);
  assert.equal(typeof body.error.message, "string");
  assert.ok((body.error.message as string).length > 0);
  assert.ok(Array.isArray(body.error.details));
  assert.ok(!/\n\s+at /.test(res.body), `stack trace in ${res.body}`);
  return { code: body.error.code as string, message: body.error.message as string };
}

/** A query reply without its timing, for comparing two replies. */
export function withoutElapsed(body: Record<string, unknown>): Record<string, unknown> {
  const { elapsed_ms: _elapsed, ...rest } = body;
  return rest;
}

/** An index's info without `updated_at`, which a rewrite of the same content still changes. */
export function withoutUpdatedAt(info: Record<string, unknown>): Record<string, unknown> {
  const { updated_at: _updated, ...rest } = info;
  return rest;
}

/** A small corpus with distinct topics, titles and metadata. */
export const SMALL_CORPUS = [
  {
    id: "solar",
    title: "The Solar System",
    text:
      "The Sun is a star at the centre of the solar system. Eight planets orbit the Sun. " +
      "Jupiter is the largest planet, and Mercury is the closest planet to the Sun.",
    metadata: { topic: "space", year: 2020 },
  },
  {
    id: "ocean",
    title: "Oceans",
    text:
      "Oceans cover most of the surface of the Earth. The blue whale is the largest animal living in " +
      "the ocean. Coral reefs grow in warm and shallow sea water.",
    metadata: { topic: "nature", year: 2021 },
  },
  {
    id: "volcano",
    title: "Volcanoes",
    text:
      "A volcano erupts when magma rises to the surface. Lava flows down the slopes of the volcano " +
      "and cools into rock. Some volcanoes sleep for centuries.",
    metadata: { topic: "nature", year: 2020 },
  },
  {
    id: "bread",
    title: null,
    text:
      "Bread is baked from flour, water, salt and yeast. The dough rises for an hour before baking. " +
      "A hot oven gives the bread a crisp crust.",
    metadata: { topic: "food", tags: ["kitchen", "baking"] },
  },
];
