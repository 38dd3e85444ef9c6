/**
 * Metadata filters that made a query cost the whole index (issue #35), against the real RAG app as a
 * child process: an OpenAI vector store search with an `or` of 250 `in` lists of 1,900 values each
 * over an index where nothing matches (the candidate window doubled over the whole index, each value
 * compared linearly: /health stalled 14 s). Now `in` / `nin` lists are sets within
 * FILTER_MAX_LIST_VALUES and FILTER_MAX_VALUES (400 past them), and a filtered query examines at most
 * FILTER_MAX_CANDIDATES candidates, saying so (a header on OpenAI's page, `filter_truncated` on
 * /rag/query). Each attack: /health answers within HEALTH_BOUND_MS throughout, peak RSS grows by
 * less than 300 MB, and the index answers as before.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { FILTER_TRUNCATED_HEADER } from "../../src/rag/http/openai-filters.js";
import {
  FILTER_MAX_CANDIDATES,
  FILTER_MAX_KEYS,
  FILTER_MAX_LIST_VALUES,
  FILTER_MAX_VALUES,
} from "../../src/rag/service/filters.js";
import { HEALTH_BOUND_MS, RSS_GROWTH_BOUND, whileProbing } from "../helpers/liveness.js";
import { makeTempDir, removeTempDirs } from "../helpers/rag-http.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

const onLinux = existsSync("/proc/self/status");
/** More chunks than a filtered query may examine, so that only the cap bounds it. */
const CHUNKS = FILTER_MAX_CANDIDATES + 2_000;
const MB = 1_000_000;

interface Reply {
  status: number;
  headers: Headers;
  body: Record<string, unknown> & { error?: { message: string } };
}

async function post(served: ServedProcess, path: string, body: unknown): Promise<Reply> {
  const res = await fetch(`${served.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Reply["body"] };
}

/**
 * An `or` of `lists` `in` lists of `values` values each, none of which any document holds (tags are
 * strings): short numbers, so that 475,000 of them fit the 1 MiB body limit as the attack's did.
 */
function inLists(lists: number, values: number) {
  return {
    type: "or",
    filters: Array.from({ length: lists }, (_, l) => ({
      type: "in",
      key: "tag",
      value: Array.from({ length: values }, (_, v) => (l * values + v) % 10),
    })),
  };
}

describe("hostile filters (#35): bounded lists, a bounded candidate window", { skip: !onLinux }, () => {
  let served: ServedProcess;
  let expected: unknown;
  const search = (filters: unknown) =>
    post(served, "/v1/vector_stores/wide/search", { query: "river stone", filters, max_num_results: 10 });
  const unfiltered = () => post(served, "/rag/query", { index_name: "wide", query: "river stone", top_k: 5 });

  before(async () => {
    served = await startServe("rag", { DATA_DIR: makeTempDir("hostile-filters") });
    await waitHealthy(served);
    // Every chunk matches the query; none has the tag the filters ask for.
    const documents = Array.from({ length: CHUNKS }, (_, i) => ({
      id: `d${i}`,
      text: `river stone number ${i} ${i % 7 === 0 ? "forest" : "meadow"}`,
      metadata: { tag: `t${i % 13}`, n: i },
    }));
    const built = await post(served, "/rag/build", { index_name: "wide", documents });
    assert.equal(built.status, 201, JSON.stringify(built.body));
    expected = (await unfiltered()).body.results;
  });

  after(() => {
    if (served && served.child.exitCode === null) served.child.kill("SIGKILL");
    removeTempDirs();
  });

  it("an `or` of 250 `in` lists of 1,900 values: 400 naming the limit, at once", async (t) => {
    const { result, slowest, growth } = await whileProbing(served, () => search(inLists(250, 1_900)));
    t.diagnostic(
      `${result.status}; longest loop stall ${Math.round(slowest)} ms; peak RSS +${Math.round(growth / MB)} MB`,
    );
    assert.equal(result.status, 400, JSON.stringify(result.body));
    assert.match(result.body.error!.message, new RegExp(`at most ${FILTER_MAX_LIST_VALUES}`));
    assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
    assert.ok(growth < RSS_GROWTH_BOUND, `peak RSS grew by ${Math.round(growth / MB)} MB`);
    // Lists each within the limit, but more values than a filter may hold in all.
    const total = await search(
      inLists(FILTER_MAX_VALUES / FILTER_MAX_LIST_VALUES + 1, FILTER_MAX_LIST_VALUES),
    );
    assert.equal(total.status, 400, JSON.stringify(total.body));
    assert.match(total.body.error!.message, new RegExp(`more than ${FILTER_MAX_VALUES}`));
  });

  it("the most values a filter may hold, matching nothing: examines the cap, says so in a header", async (t) => {
    const filters = inLists(FILTER_MAX_VALUES / FILTER_MAX_LIST_VALUES, FILTER_MAX_LIST_VALUES);
    const { result, slowest, growth } = await whileProbing(served, () => search(filters));
    t.diagnostic(
      `${result.status}; longest loop stall ${Math.round(slowest)} ms; peak RSS +${Math.round(growth / MB)} MB`,
    );
    assert.equal(result.status, 200, JSON.stringify(result.body));
    assert.deepEqual(result.body.data, []);
    assert.equal(
      result.headers.get(FILTER_TRUNCATED_HEADER),
      `examined=${FILTER_MAX_CANDIDATES}; limit=${FILTER_MAX_CANDIDATES}`,
    );
    assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
    assert.ok(growth < RSS_GROWTH_BOUND, `peak RSS grew by ${Math.round(growth / MB)} MB`);
    // A filter that matches answers in full, without the header; the index is as it was.
    const matching = await search({ type: "in", key: "tag", value: ["t3", "absent"] });
    assert.equal(matching.status, 200);
    assert.equal((matching.body.data as unknown[]).length, 10);
    assert.equal(matching.headers.get(FILTER_TRUNCATED_HEADER), null);
    assert.deepEqual((await unfiltered()).body.results, expected);
  });

  it("/rag/query's equality filter: keys beyond the limit are a 400; no match is cut and says so", async (t) => {
    const tooMany = Object.fromEntries(Array.from({ length: FILTER_MAX_KEYS + 1 }, (_, i) => [`k${i}`, i]));
    const refused = await post(served, "/rag/query", { index_name: "wide", query: "river", filter: tooMany });
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.match(refused.body.error!.message, new RegExp(`the limit is ${FILTER_MAX_KEYS}`));
    const { result, slowest, growth } = await whileProbing(served, () =>
      post(served, "/rag/query", {
        index_name: "wide",
        query: "river stone",
        top_k: 5,
        filter: { tag: "absent", n: { nested: [1, 2, 3] } },
      }),
    );
    t.diagnostic(
      `${result.status}; longest loop stall ${Math.round(slowest)} ms; peak RSS +${Math.round(growth / MB)} MB`,
    );
    assert.equal(result.status, 200, JSON.stringify(result.body));
    assert.deepEqual(result.body.results, []);
    assert.equal(result.body.filter_truncated, true);
    assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
    assert.ok(growth < RSS_GROWTH_BOUND, `peak RSS grew by ${Math.round(growth / MB)} MB`);
    const found = await post(served, "/rag/query", {
      index_name: "wide",
      query: "river stone",
      top_k: 5,
      filter: { tag: "t5" },
    });
    assert.equal((found.body.results as unknown[]).length, 5);
    assert.equal(found.body.filter_truncated, false);
  });
});
