/**
 * Issue #34's corpus: the bodies real SDKs sent for common calls (recorded by
 * scripts/record-client-requests.ts into recorded/*.json), replayed against one app on the test
 * model. Each must answer 2xx, and the fields the tolerant dialects read and did not act on
 * (x-lectern-ignored-fields) must be those listed here, and no others.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

interface Recorded {
  call: string;
  method: string;
  path: string;
  body: unknown;
  response?: unknown;
}

/**
 * Pairs the ids of a recorded answer with the replayed one's, walking both alike, so that a later
 * request naming a recorded id (previous_response_id, an item_reference) names the replayed one.
 */
function pairIds(recorded: unknown, replayed: unknown, ids: Map<string, string>): void {
  if (typeof recorded !== "object" || recorded === null || typeof replayed !== "object" || replayed === null)
    return;
  for (const [key, value] of Object.entries(recorded)) {
    const other = (replayed as Record<string, unknown>)[key];
    if (key === "id" && typeof value === "string" && typeof other === "string") ids.set(value, other);
    else pairIds(value, other, ids);
  }
}

function withIds(body: unknown, ids: Map<string, string>): string {
  let text = JSON.stringify(body);
  for (const [recorded, replayed] of ids)
    text = text.split(JSON.stringify(recorded)).join(JSON.stringify(replayed));
  return text;
}

const dir = path.join(import.meta.dirname, "recorded");
const corpus = readdirSync(dir)
  .filter((name) => name.endsWith(".json"))
  .map((name) => ({
    client: name.replace(/\.json$/, ""),
    calls: JSON.parse(readFileSync(path.join(dir, name), "utf8")) as Recorded[],
  }));

/** Ignored fields that are expected, by "client/call", each with why. */
const EXPECTED_IGNORED: Record<string, string[]> = {};

describe("recorded SDK requests replayed against the app", () => {
  let server: RunningTextgen;
  before(async () => {
    server = await startTextgen();
  });
  after(async () => server.close());

  it("the corpus holds every client's recording", () => {
    assert.deepEqual(corpus.map(({ client }) => client).sort(), [
      "ai-sdk",
      "anthropic",
      "langchain",
      "ollama",
      "openai",
    ]);
    for (const { client, calls } of corpus) assert.ok(calls.length > 0, client);
  });

  for (const { client, calls } of corpus)
    it(`${client}: every recorded request is 2xx with no unexpected ignored fields`, async () => {
      const ids = new Map<string, string>();
      for (const { call, method, path: route, body, response: recorded } of calls) {
        const response = await fetch(`${server.url}${route}`, {
          method,
          headers: { "content-type": "application/json" },
          body: withIds(body, ids),
        });
        const text = await response.text();
        assert.ok(response.ok, `${client}/${call}: ${response.status} ${text.slice(0, 300)}`);
        if (recorded !== undefined) pairIds(recorded, JSON.parse(text), ids);
        const ignored = (response.headers.get("x-lectern-ignored-fields") ?? "")
          .split(",")
          .map((field) => field.trim())
          .filter((field) => field !== "");
        const expected = EXPECTED_IGNORED[`${client}/${call}`] ?? [];
        assert.deepEqual(
          ignored.filter((field) => !expected.includes(field)),
          [],
          `${client}/${call} ignored fields`,
        );
      }
    });
});
