/**
 * Bad input: every one is a 4xx JSON error of the contract's shape, never a 5xx, and changes nothing —
 * after each, the index built at the start answers the same query identically and no index appeared.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  SMALL_CORPUS,
  assertApiError,
  assertStatus,
  openRagApp,
  ragClient,
  removeTempDirs,
  withoutElapsed,
  type RagApp,
  type RagClient,
  type Reply,
} from "../helpers/rag-http.js";

interface BadRequest {
  name: string;
  method?: "GET" | "POST" | "DELETE";
  url: string;
  /** An object is sent as JSON; a string is sent as it is. */
  payload?: unknown;
  contentType?: string;
  status?: number;
}

const REF = "ref";
const REF_QUERY = { index_name: REF, query: "largest planet ocean volcano", top_k: 10 };
const build = (fields: Record<string, unknown>, name = "bad build"): BadRequest => ({
  name,
  url: "/rag/build",
  payload: fields,
});
/** A build that would overwrite the reference index, were it accepted. */
const replaceRef = (fields: Record<string, unknown>) => ({
  index_name: REF,
  mode: "replace",
  documents: ["Replacement text that must never be stored."],
  ...fields,
});
const query = (fields: Record<string, unknown>) => ({ ...REF_QUERY, ...fields });

const BAD_NAMES: Array<[string, unknown]> = [
  ['".."', ".."],
  ['"."', "."],
  ['"a/b"', "a/b"],
  ["129 characters", "x".repeat(129)],
  ['""', ""],
  ["a space", "my index"],
  ["a trailing space", "ref "],
  ["unicode é", "café"],
  ["CJK", "索引"],
  ["emoji", "idx🙂"],
  ["a NUL", "a\u0000b"],
  ["a backslash", "a\\b"],
  ["a number", 42],
  ["null", null],
  ["an array", ["ref"]],
];

const CASES: BadRequest[] = [
  // Body shape
  { name: "malformed JSON", url: "/rag/build", payload: '{"index_name": "ref", "documents": [' },
  { name: "truncated JSON in a query", url: "/rag/query", payload: '{"index_name":"ref","query":"x"' },
  { name: "empty body", url: "/rag/build", payload: "" },
  { name: "body is an array", url: "/rag/build", payload: [replaceRef({})] },
  { name: "body is a string", url: "/rag/build", payload: '"ref"' },
  { name: "body is null", url: "/rag/query", payload: "null" },
  { name: "text/plain body", url: "/rag/build", payload: "index_name=ref", contentType: "text/plain" },
  {
    name: "unsupported content type",
    url: "/rag/build",
    payload: JSON.stringify(replaceRef({})),
    contentType: "application/xml",
    status: 415,
  },
  {
    name: "__proto__ at the top level",
    url: "/rag/build",
    payload: '{"index_name":"ref","mode":"replace","documents":["x"],"__proto__":{"polluted":true}}',
  },
  {
    name: "__proto__ in metadata",
    url: "/rag/build",
    payload:
      '{"index_name":"ref","mode":"replace","documents":[{"text":"x","metadata":{"__proto__":{"a":1}}}]}',
  },
  {
    name: "__proto__ in a filter",
    url: "/rag/query",
    payload: '{"index_name":"ref","query":"planet","filter":{"__proto__":{"topic":"space"}}}',
  },
  {
    name: "constructor.prototype in a body",
    url: "/rag/build",
    payload: '{"index_name":"ref","mode":"replace","documents":["x"],"constructor":{"prototype":{"a":1}}}',
  },

  // POST /rag/build: missing and wrong fields
  build({ mode: "replace", documents: ["x"] }, "build without index_name"),
  build({ index_name: REF, mode: "replace" }, "build without documents or files"),
  build(replaceRef({ documents: [] }), "empty documents array and no files"),
  build(replaceRef({ documents: [], files: [] }), "empty documents and empty files"),
  build(replaceRef({ documents: "just a string" }), "documents is a string"),
  build(replaceRef({ documents: { text: "x" } }), "documents is an object"),
  build(replaceRef({ documents: [42] }), "a document is a number"),
  build(replaceRef({ documents: [null] }), "a document is null"),
  build(replaceRef({ documents: [{}] }), "a document without text"),
  build(replaceRef({ documents: [{ title: "t" }] }), "a document with a title only"),
  build(replaceRef({ documents: [{ text: 5 }] }), "text is a number"),
  build(replaceRef({ documents: [""] }), "empty string document"),
  build(replaceRef({ documents: [{ text: "" }] }), "empty text"),
  build(replaceRef({ documents: ["   \n\t "] }), "whitespace-only string document"),
  build(replaceRef({ documents: ["Fine text.", { id: "blank", text: " \n " }] }), "one whitespace-only text"),
  build(replaceRef({ documents: [{ id: "", text: "x" }] }), "empty id"),
  build(replaceRef({ documents: [{ id: 7, text: "x" }] }), "id is a number"),
  build(replaceRef({ documents: [{ id: "x".repeat(513), text: "x" }] }), "id of 513 characters"),
  build(replaceRef({ documents: [{ text: "x", title: 5 }] }), "title is a number"),
  build(replaceRef({ documents: [{ text: "x", title: "t".repeat(4097) }] }), "title of 4,097 characters"),
  build(replaceRef({ documents: [{ text: "x", metadata: "m" }] }), "metadata is a string"),
  build(replaceRef({ documents: [{ text: "x", metadata: [1, 2] }] }), "metadata is an array"),
  build(replaceRef({ documents: [{ text: "x", metadata: null }] }), "metadata is null"),
  build(
    replaceRef({
      documents: [
        { id: "same", text: "first" },
        { id: "same", text: "second" },
      ],
    }),
    "duplicate explicit ids with different texts",
  ),
  build(
    replaceRef({
      documents: [
        { id: "same", text: "identical" },
        { id: "same", text: "identical" },
      ],
    }),
    "duplicate explicit ids with the same text",
  ),
  build(replaceRef({ files: ["a.txt"], documents: undefined }), "files with RAG_FILES_DIR unset"),
  build(replaceRef({ files: ["a.txt"] }), "files and documents with RAG_FILES_DIR unset"),
  build(replaceRef({ files: "a.txt" }), "files is a string"),
  build(replaceRef({ files: [""] }), "empty file path"),
  build(replaceRef({ files: [3] }), "file path is a number"),
  build(replaceRef({ chunk_size: "1000" }), "chunk_size is a string"),
  build(replaceRef({ chunk_size: 99 }), "chunk_size 99"),
  build(replaceRef({ chunk_size: 10_001 }), "chunk_size 10,001"),
  build(replaceRef({ chunk_size: 1000.5 }), "chunk_size 1000.5"),
  build(replaceRef({ chunk_size: null }), "chunk_size null"),
  build(replaceRef({ overlap: 501 }), "overlap 501 > chunk_size/2"),
  build(replaceRef({ chunk_size: 200, overlap: 101 }), "overlap 101 > 200/2"),
  build(replaceRef({ overlap: -1 }), "overlap -1"),
  build(replaceRef({ overlap: "10" }), "overlap is a string"),
  build(replaceRef({ scorer: "bm26" }), "unknown scorer"),
  build(replaceRef({ scorer: "BM25" }), "scorer in upper case"),
  build(replaceRef({ mode: "upsert" }), "unknown mode"),
  build(replaceRef({ mode: "" }), "empty mode"),
  { ...build({ index_name: REF, documents: ["x"] }, "create on the existing index"), status: 409 },
  {
    ...build({ index_name: "not-built", mode: "append", documents: ["x"] }, "append to a missing index"),
    status: 404,
  },

  // POST /rag/query
  { name: "query without query or question", url: "/rag/query", payload: { index_name: REF } },
  { name: "empty query", url: "/rag/query", payload: query({ query: "" }) },
  { name: "empty question", url: "/rag/query", payload: { index_name: REF, question: "" } },
  { name: "query of 4,097 characters", url: "/rag/query", payload: query({ query: "a".repeat(4097) }) },
  { name: "query is a number", url: "/rag/query", payload: query({ query: 42 }) },
  { name: "query is an array", url: "/rag/query", payload: query({ query: ["planet"] }) },
  { name: "query and question differ", url: "/rag/query", payload: query({ question: "other" }) },
  { name: "query without index_name", url: "/rag/query", payload: { query: "planet" } },
  { name: "top_k 0", url: "/rag/query", payload: query({ top_k: 0 }) },
  { name: "top_k 101", url: "/rag/query", payload: query({ top_k: 101 }) },
  { name: "top_k 1.5", url: "/rag/query", payload: query({ top_k: 1.5 }) },
  { name: "top_k is a string", url: "/rag/query", payload: query({ top_k: "5" }) },
  { name: "min_score -0.1", url: "/rag/query", payload: query({ min_score: -0.1 }) },
  { name: "min_score 1.5", url: "/rag/query", payload: query({ min_score: 1.5 }) },
  { name: "min_score is a string", url: "/rag/query", payload: query({ min_score: "0.5" }) },
  { name: "filter is a string", url: "/rag/query", payload: query({ filter: "topic=space" }) },
  { name: "filter is an array", url: "/rag/query", payload: query({ filter: [{ topic: "space" }] }) },
  { name: "filter is a number", url: "/rag/query", payload: query({ filter: 1 }) },
  { name: "filter is null", url: "/rag/query", payload: query({ filter: null }) },
  { name: "unknown answer mode", url: "/rag/query", payload: query({ answer: "maybe" }) },
  {
    name: "query on an unknown index",
    url: "/rag/query",
    payload: query({ index_name: "nope" }),
    status: 404,
  },
  {
    name: "query in a tenant without the index",
    url: "/rag/query",
    payload: query({ tenant_id: "other" }),
    status: 404,
  },

  // Documents routes
  { name: "add documents: empty array", url: `/rag/indices/${REF}/documents`, payload: { documents: [] } },
  { name: "add documents: missing documents", url: `/rag/indices/${REF}/documents`, payload: {} },
  {
    name: "add documents: empty text",
    url: `/rag/indices/${REF}/documents`,
    payload: { documents: [{ text: "" }] },
  },
  {
    name: "add documents: whitespace-only text",
    url: `/rag/indices/${REF}/documents`,
    payload: { documents: [{ id: "solar", text: "  " }] },
  },
  {
    name: "add documents: duplicate ids",
    url: `/rag/indices/${REF}/documents`,
    payload: {
      documents: [
        { id: "solar", text: "one" },
        { id: "solar", text: "two" },
      ],
    },
  },
  {
    name: "add documents: bad tenant",
    url: `/rag/indices/${REF}/documents`,
    payload: { tenant_id: "a b", documents: ["x"] },
  },
  {
    name: "add documents to a missing index",
    url: "/rag/indices/nope/documents",
    payload: { documents: ["x"] },
    status: 404,
  },
  {
    name: "delete an unknown document",
    method: "DELETE",
    url: `/rag/indices/${REF}/documents/nope`,
    status: 404,
  },
  { name: "delete a document with an empty id", method: "DELETE", url: `/rag/indices/${REF}/documents/` },
  {
    name: "delete a document in another tenant",
    method: "DELETE",
    url: `/rag/indices/${REF}/documents/solar?tenant_id=other`,
    status: 404,
  },

  // Index routes
  { name: "delete with force=yes", method: "DELETE", url: `/rag/indices/${REF}?force=yes`, status: 400 },
  {
    name: "delete in another tenant",
    method: "DELETE",
    url: `/rag/indices/${REF}?tenant_id=other`,
    status: 404,
  },
  {
    name: "delete with a bad tenant",
    method: "DELETE",
    url: `/rag/indices/${REF}?tenant_id=..`,
    status: 400,
  },
  { name: "stats with a bad tenant", method: "GET", url: `/rag/stats/${REF}?tenant_id=%C3%A9`, status: 400 },
  { name: "list with two tenant_id values", method: "GET", url: "/rag/indices?tenant_id=a&tenant_id=b" },
  { name: "unknown route", method: "GET", url: "/rag/nothing", status: 404 },
  { name: "wrong method", method: "GET", url: "/rag/build", status: 404 },
];

// Index names and tenant ids, in bodies, paths and query strings.
for (const [label, value] of BAD_NAMES) {
  CASES.push(build(replaceRef({ index_name: value }), `build with index_name ${label}`));
  CASES.push(build(replaceRef({ tenant_id: value }), `build with tenant_id ${label}`));
  CASES.push({
    name: `query with index_name ${label}`,
    url: "/rag/query",
    payload: query({ index_name: value }),
  });
  CASES.push({
    name: `query with tenant_id ${label}`,
    url: "/rag/query",
    payload: query({ tenant_id: value }),
  });
  if (typeof value !== "string") continue;
  const encoded = encodeURIComponent(value);
  CASES.push({
    name: `list with tenant_id ${label}`,
    method: "GET",
    url: `/rag/indices?tenant_id=${encoded}`,
  });
  CASES.push({ name: `stats of index ${label}`, method: "GET", url: `/rag/stats/${encoded}` });
  CASES.push({ name: `delete index ${label}`, method: "DELETE", url: `/rag/indices/${encoded}` });
  CASES.push({
    name: `add documents to index ${label}`,
    url: `/rag/indices/${encoded}/documents`,
    payload: { documents: ["x"] },
  });
  CASES.push({
    name: `delete a document of index ${label}`,
    method: "DELETE",
    url: `/rag/indices/${encoded}/documents/solar`,
  });
}
// The same in paths written with literal dots, which clients may send unnormalised.
for (const dots of ["%2E%2E", "%2E", "..%2F..%2Fetc"]) {
  CASES.push({ name: `stats of index ${dots}`, method: "GET", url: `/rag/stats/${dots}` });
  CASES.push({ name: `delete index ${dots}`, method: "DELETE", url: `/rag/indices/${dots}` });
}

after(() => removeTempDirs());

describe("bad input is a 4xx contract error and changes nothing", () => {
  let app: RagApp;
  let rag: RagClient;
  let reference: { query: unknown; indices: unknown; tenants: unknown; totals: unknown };

  const observe = async () => {
    const stats = (await rag.stats()).json();
    return {
      query: withoutElapsed((await rag.query(REF_QUERY)).json()),
      indices: (await rag.indices()).json(),
      tenants: stats.tenants_count,
      totals: [stats.indices_count, stats.documents_count, stats.chunks_count],
    };
  };

  before(async () => {
    ({ app } = await openRagApp());
    rag = ragClient(app);
    assertStatus(await rag.build({ index_name: REF, documents: SMALL_CORPUS }), 201);
    reference = await observe();
    assert.ok((reference.query as { count: number }).count >= 3);
  });
  after(async () => app.close());

  for (const bad of CASES) {
    it(`${bad.name} → ${bad.status ?? "4xx"}`, async () => {
      const res = await app.inject({
        method: bad.method ?? "POST",
        url: bad.url,
        ...(bad.payload === undefined
          ? {}
          : {
              payload: typeof bad.payload === "string" ? bad.payload : JSON.stringify(bad.payload),
              headers: { "content-type": bad.contentType ?? "application/json" },
            }),
      });
      assertApiError(res, bad.status);
      assert.deepEqual(await observe(), reference);
    });
  }

  it("a valid request after all that still answers the same", async () => {
    assert.deepEqual(await observe(), reference);
  });

  it("index names and document ids too long for the router are contract errors, not a bare 414", async () => {
    assertApiError(await rag.indexStats("x".repeat(129)), 400);
    assertApiError(await rag.deleteIndex("x".repeat(129)), 400);
    assertApiError(await rag.deleteDocument(REF, "d".repeat(513)), 400);
    assert.deepEqual(await observe(), reference);
  });

  it("a malformed percent-encoding in a path is a contract error", async () => {
    assertApiError(await rag.send("GET", "/rag/stats/%E0%A4%A"), 400);
    assertApiError(await rag.send("DELETE", "/rag/indices/%ZZ"), 400);
  });
});

describe("valid names at the limits", () => {
  it("an index name of 128 characters and a document id of 512 work on every route", async () => {
    const { app } = await openRagApp();
    const rag = ragClient(app);
    try {
      const name = "n".repeat(128);
      const tenant = "t".repeat(128);
      assertStatus(
        await rag.build({ index_name: name, tenant_id: tenant, documents: ["Long names work."] }),
        201,
      );
      assertStatus(await rag.query({ index_name: name, tenant_id: tenant, query: "names" }), 200);
      assert.equal((await rag.indices(tenant)).json().count, 1);
      assertStatus(await rag.indexStats(name, tenant), 200);
      assertStatus(
        await rag.addDocuments(name, { tenant_id: tenant, documents: [{ id: "d", text: "More." }] }),
        200,
      );
      assertStatus(await rag.deleteDocument(name, "d", `?tenant_id=${tenant}`), 200);
      const longId = "i".repeat(512);
      assertStatus(
        await rag.addDocuments(name, { tenant_id: tenant, documents: [{ id: longId, text: "Long id." }] }),
        200,
      );
      assertStatus(await rag.deleteDocument(name, longId, `?tenant_id=${tenant}`), 200);
      assertStatus(await rag.deleteIndex(name, `?tenant_id=${tenant}`), 200);
    } finally {
      await app.close();
    }
  });

  it("names with letters, digits, dots, dashes and underscores are accepted", async () => {
    const { app } = await openRagApp();
    const rag = ragClient(app);
    try {
      for (const name of ["a", "A.b-c_d", "...", "-", "_", "v1.2.3", "n".repeat(100)]) {
        assertStatus(await rag.build({ index_name: name, tenant_id: name, documents: ["Fine."] }), 201);
        assertStatus(await rag.indexStats(name, name), 200);
        assertStatus(await rag.deleteIndex(name, `?tenant_id=${name}`), 200);
      }
    } finally {
      await app.close();
    }
  });
});

describe("bodies over the limit are 413", () => {
  let app: RagApp;
  let rag: RagClient;
  let reference: unknown;

  before(async () => {
    // MAX_BODY_BYTES sets the build/document routes' limit; other routes keep min(1 MiB, it).
    ({ app } = await openRagApp({ MAX_BODY_BYTES: "4096" }));
    rag = ragClient(app);
    assertStatus(await rag.build({ index_name: REF, documents: SMALL_CORPUS }), 201);
    reference = withoutElapsed((await rag.query(REF_QUERY)).json());
  });
  after(async () => app.close());

  const big = "word ".repeat(1000);
  const cases: Array<[string, () => Promise<Reply>]> = [
    ["a build", () => rag.build({ index_name: REF, mode: "replace", documents: [big] })],
    ["a new index", () => rag.build({ index_name: "new-one", documents: [big] })],
    ["a query", () => rag.query({ ...REF_QUERY, query: big.slice(0, 4096), filter: { pad: big } })],
    ["added documents", () => rag.addDocuments(REF, { documents: [big] })],
  ];
  for (const [label, send] of cases) {
    it(`${label} over the limit → 413 payload_too_large`, async () => {
      const res = await send();
      assertApiError(res, 413);
      assert.equal(res.json().error.code, "payload_too_large");
      assert.deepEqual(withoutElapsed((await rag.query(REF_QUERY)).json()), reference);
      assertApiError(await rag.indexStats("new-one"), 404);
    });
  }

  it("a body just under the limit is accepted", async () => {
    const res = await rag.addDocuments(REF, { documents: [{ id: "small", text: "word ".repeat(700) }] });
    assertStatus(res, 200);
  });
});
