/**
 * Issue #34: Responses kept durably, per tenant, for RESPONSES_TTL and within RESPONSES_MAX_BYTES,
 * through the app's HTTP routes over the scripted generator (every answer known, and what the model
 * was given readable in ScriptedGenerator.requests). The clock of the store is injected where the
 * TTL is the subject; nothing sleeps.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildTextgenApp } from "../../src/textgen/app.js";
import type { ChatRequest } from "../../src/textgen/engine/generator.js";
import { DurableResponsesStore } from "../../src/textgen/store/responses-store.js";
import { sqliteWorkerBackend } from "../../src/textgen/store/worker-backend.js";
import { testConfig } from "../helpers/env.js";
import { ScriptedGenerator } from "../helpers/scripted-generator.js";

// Response bodies are read loosely: the assertions check their shape.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

const scripts = {
  text: { steps: [{ text: "Hello." }] },
  think: { steps: [{ reasoning: "Let me see." }, { text: "Done." }] },
  tool: { steps: [{ toolCall: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] },
};
const ALICE = "alice-key-0123456789";
const BOB = "bob-key-0123456789";
const DAY = 86_400_000;

const folders: string[] = [];
after(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});
const folder = () => {
  const made = mkdtempSync(path.join(os.tmpdir(), "lectern-responses-app-"));
  folders.push(made);
  return made;
};

interface Running {
  url: string;
  generator: ScriptedGenerator;
  app: Awaited<ReturnType<typeof buildTextgenApp>>;
  call(method: string, route: string, body?: object, key?: string): Promise<{ status: number; body: Loose }>;
  close(): Promise<void>;
}

/** The app on the scripted generator; `clock` given: a store under `dataDir` on that clock. */
async function start(
  options: { dataDir?: string; env?: Record<string, string>; clock?: { now: number } } = {},
): Promise<Running> {
  const dataDir = options.dataDir ?? folder();
  const config = testConfig({
    GENERATION_UPSTREAM_URL: "http://127.0.0.1:9/v1",
    DATA_DIR: dataDir,
    ...options.env,
  });
  const generator = new ScriptedGenerator(scripts);
  const clock = options.clock;
  const responsesStore = clock
    ? new DurableResponsesStore(sqliteWorkerBackend(dataDir, config.responses), {
        limits: config.responses,
        now: () => clock.now,
        where: "test",
      })
    : undefined;
  const app = await buildTextgenApp({ config, generator, responsesStore });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return {
    url,
    generator,
    app,
    async call(method, route, body, key) {
      const response = await fetch(`${url}${route}`, {
        method,
        headers: {
          ...(body && { "content-type": "application/json" }),
          ...(key && { authorization: `Bearer ${key}` }),
        },
        body: body && JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as Loose };
    },
    close: () => app.close(),
  };
}

/** A 404 in OpenAI's shape, naming the id (and the field, where it came from one). */
function assertNotFound(reply: { status: number; body: Loose }, id: string, param: string | null = null) {
  assert.equal(reply.status, 404, JSON.stringify(reply.body));
  assert.equal(reply.body.error.type, "not_found_error");
  assert.equal(reply.body.error.code, "not_found");
  assert.equal(reply.body.error.param, param);
  assert.match(reply.body.error.message, new RegExp(id));
}

const messagesOf = (generator: ScriptedGenerator) =>
  (generator.requests.at(-1) as ChatRequest).messages.map((message) => `${message.role}:${message.content}`);

describe("Responses kept by the app", () => {
  let app: Running;
  before(async () => {
    app = await start();
  });
  after(async () => app.close());

  it("store defaults to true: retrieve answers what create answered, input_items lists the input, delete", async () => {
    const created = await app.call("POST", "/v1/responses", {
      model: "m",
      input: [{ role: "user", content: "script:think" }],
      metadata: { topic: "test" },
    });
    assert.equal(created.status, 200);
    assert.equal(created.body.store, true);
    const retrieved = await app.call("GET", `/v1/responses/${created.body.id}`);
    assert.equal(retrieved.status, 200);
    assert.deepEqual(retrieved.body, created.body);
    assert.deepEqual(Object.keys(retrieved.body), Object.keys(created.body), "the fields in their order");

    const items = await app.call("GET", `/v1/responses/${created.body.id}/input_items`);
    assert.equal(items.body.object, "list");
    assert.equal(items.body.data.length, 1);
    const [input] = items.body.data;
    assert.equal(input.type, "message");
    assert.equal(input.role, "user");
    assert.deepEqual(input.content, [{ type: "input_text", text: "script:think" }]);
    assert.match(input.id, /^msg_/);
    assert.equal(items.body.first_id, input.id);
    assert.equal(items.body.has_more, false);

    const deleted = await app.call("DELETE", `/v1/responses/${created.body.id}`);
    assert.deepEqual(deleted.body, { id: created.body.id, object: "response.deleted", deleted: true });
    assertNotFound(await app.call("GET", `/v1/responses/${created.body.id}`), created.body.id);
    assertNotFound(await app.call("DELETE", `/v1/responses/${created.body.id}`), created.body.id);
    assertNotFound(await app.call("GET", `/v1/responses/${created.body.id}/input_items`), created.body.id);
    assertNotFound(
      await app.call("POST", "/v1/responses", {
        model: "m",
        input: "Hi",
        previous_response_id: created.body.id,
      }),
      created.body.id,
      "previous_response_id",
    );
    assertNotFound(await app.call("GET", "/v1/responses/resp_never"), "resp_never");
  });

  it("a streamed response is kept as the stream's final response; store: false keeps nothing", async () => {
    const streamed = await fetch(`${app.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", input: "script:tool", stream: true }),
    });
    const text = await streamed.text();
    const completed = text
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)) as Loose)
      .find((event) => event.type === "response.completed");
    const retrieved = await app.call("GET", `/v1/responses/${completed.response.id}`);
    assert.deepEqual(retrieved.body, completed.response);
    assert.equal(retrieved.body.output[0].type, "function_call");

    const unkept = await app.call("POST", "/v1/responses", { model: "m", input: "Hi", store: false });
    assert.equal(unkept.body.store, false);
    assertNotFound(await app.call("GET", `/v1/responses/${unkept.body.id}`), unkept.body.id);
  });

  it("previous_response_id: the model reads every turn before, and item_reference finds a kept item", async () => {
    const first = await app.call("POST", "/v1/responses", {
      model: "m",
      input: "one",
      instructions: "Be brief.",
    });
    const second = await app.call("POST", "/v1/responses", {
      model: "m",
      input: "two",
      previous_response_id: first.body.id,
    });
    const third = await app.call("POST", "/v1/responses", {
      model: "m",
      input: [{ role: "user", content: "three" }],
      previous_response_id: second.body.id,
    });
    assert.equal(third.status, 200);
    // Instructions are not carried over (as OpenAI's): only the items of each turn are.
    assert.deepEqual(messagesOf(app.generator), [
      "user:one",
      "assistant:Hello.",
      "user:two",
      "assistant:Hello.",
      "user:three",
    ]);
    // Each response lists its own input, not its predecessors'.
    const items = await app.call("GET", `/v1/responses/${third.body.id}/input_items`);
    assert.deepEqual(
      items.body.data.map((item: Loose) => item.content[0].text),
      ["three"],
    );
    const answer = first.body.output[0];
    await app.call("POST", "/v1/responses", {
      model: "m",
      input: [
        { role: "user", content: "one" },
        { type: "item_reference", id: answer.id },
        { role: "user", content: "again" },
      ],
    });
    assert.deepEqual(messagesOf(app.generator), ["user:one", "assistant:Hello.", "user:again"]);
    assertNotFound(
      await app.call("POST", "/v1/responses", {
        model: "m",
        input: [{ type: "item_reference", id: "msg_nope" }],
      }),
      "msg_nope",
      "input.0",
    );
    // A response whose predecessor is gone cannot be continued: the 404 names the one missing.
    await app.call("DELETE", `/v1/responses/${second.body.id}`);
    const broken = await app.call("POST", "/v1/responses", {
      model: "m",
      input: "four",
      previous_response_id: third.body.id,
    });
    assertNotFound(broken, second.body.id, "previous_response_id");
  });

  it("input_items pages: limit, order, after, before; limit is clamped to 1…100; an unknown cursor is a 404", async () => {
    const input = Array.from({ length: 5 }, (_, i) => ({ role: "user", content: `m${i}` }));
    const created = await app.call("POST", "/v1/responses", { model: "m", input });
    const route = `/v1/responses/${created.body.id}/input_items`;
    const texts = (page: Loose) => page.body.data.map((item: Loose) => item.content[0].text);
    const newest = await app.call("GET", `${route}?limit=2`);
    assert.deepEqual(texts(newest), ["m4", "m3"]);
    assert.equal(newest.body.has_more, true);
    const next = await app.call("GET", `${route}?limit=2&after=${newest.body.last_id}`);
    assert.deepEqual(texts(next), ["m2", "m1"]);
    assert.deepEqual(texts(await app.call("GET", `${route}?order=asc&limit=0`)), ["m0"]);
    assert.deepEqual(texts(await app.call("GET", `${route}?order=asc&limit=500`)), [
      "m0",
      "m1",
      "m2",
      "m3",
      "m4",
    ]);
    assert.deepEqual(texts(await app.call("GET", `${route}?order=asc&before=${next.body.first_id}`)), [
      "m0",
      "m1",
    ]);
    assert.equal((await app.call("GET", `${route}?order=sideways`)).status, 400);
    assertNotFound(await app.call("GET", `${route}?after=msg_nope`), "msg_nope", "after");
  });

  it("the Conversations API: create, retrieve, update, items create/list/retrieve/delete, delete", async () => {
    const created = await app.call("POST", "/v1/conversations", {
      items: [{ type: "message", role: "user", content: "Hello there" }],
      metadata: { topic: "greeting" },
    });
    assert.equal(created.status, 200);
    const id = created.body.id;
    assert.match(id, /^conv_/);
    assert.equal(created.body.object, "conversation");
    assert.deepEqual(created.body.metadata, { topic: "greeting" });
    assert.equal(typeof created.body.created_at, "number");
    assert.deepEqual((await app.call("GET", `/v1/conversations/${id}`)).body, created.body);
    const updated = await app.call("POST", `/v1/conversations/${id}`, { metadata: { topic: "weather" } });
    assert.deepEqual(updated.body.metadata, { topic: "weather" });
    assert.equal(
      (await app.call("POST", `/v1/conversations/${id}`, { metadata: { k: "v".repeat(513) } })).status,
      400,
    );

    const added = await app.call("POST", `/v1/conversations/${id}/items`, {
      items: [
        { role: "assistant", content: "Hi!" },
        { role: "user", content: "How are you?" },
      ],
    });
    assert.equal(added.body.object, "list");
    assert.deepEqual(
      added.body.data.map((item: Loose) => [item.role, item.content[0].type]),
      [
        ["assistant", "output_text"],
        ["user", "input_text"],
      ],
    );
    const listed = await app.call("GET", `/v1/conversations/${id}/items?order=asc`);
    assert.deepEqual(
      listed.body.data.map((item: Loose) => item.content[0].text),
      ["Hello there", "Hi!", "How are you?"],
    );
    const itemId = added.body.data[0].id;
    assert.deepEqual(
      (await app.call("GET", `/v1/conversations/${id}/items/${itemId}`)).body,
      added.body.data[0],
    );
    const afterDelete = await app.call("DELETE", `/v1/conversations/${id}/items/${itemId}`);
    assert.equal(afterDelete.body.id, id);
    assert.equal(afterDelete.body.object, "conversation");
    assertNotFound(await app.call("GET", `/v1/conversations/${id}/items/${itemId}`), itemId);
    assertNotFound(await app.call("DELETE", `/v1/conversations/${id}/items/${itemId}`), itemId);

    const deleted = await app.call("DELETE", `/v1/conversations/${id}`);
    assert.deepEqual(deleted.body, { id, object: "conversation.deleted", deleted: true });
    for (const [method, route] of [
      ["GET", `/v1/conversations/${id}`],
      ["DELETE", `/v1/conversations/${id}`],
      ["GET", `/v1/conversations/${id}/items`],
      ["GET", `/v1/conversations/${id}/items/${itemId}`],
    ])
      assertNotFound(await app.call(method!, route!), id);
    assertNotFound(await app.call("POST", `/v1/conversations/${id}/items`, { items: [] }), id);
    // Every field of a new conversation is optional: no body at all is an empty one.
    const bare = await app.call("POST", "/v1/conversations");
    assert.equal(bare.status, 200);
    assert.deepEqual(bare.body.metadata, {});
  });

  it("conversation on POST /v1/responses: its items come first, the input and output join it", async () => {
    const conversation = await app.call("POST", "/v1/conversations", {
      items: [{ role: "user", content: "My name is Ada." }],
    });
    const id = conversation.body.id;
    const first = await app.call("POST", "/v1/responses", { model: "m", input: "Hi", conversation: id });
    assert.equal(first.status, 200);
    assert.deepEqual(first.body.conversation, { id });
    assert.deepEqual(messagesOf(app.generator), ["user:My name is Ada.", "user:Hi"]);
    // store: false: the turn still joins the conversation; the response itself is not kept.
    const second = await app.call("POST", "/v1/responses", {
      model: "m",
      input: "script:think",
      conversation: { id },
      store: false,
    });
    assert.deepEqual(messagesOf(app.generator), [
      "user:My name is Ada.",
      "user:Hi",
      "assistant:Hello.",
      "user:script:think",
    ]);
    assertNotFound(await app.call("GET", `/v1/responses/${second.body.id}`), second.body.id);
    const items = await app.call("GET", `/v1/conversations/${id}/items?order=asc`);
    assert.deepEqual(
      items.body.data.map((item: Loose) => item.type),
      ["message", "message", "message", "message", "reasoning", "message"],
    );
    const together = await app.call("POST", "/v1/responses", {
      model: "m",
      input: "x",
      conversation: id,
      previous_response_id: first.body.id,
    });
    assert.equal(together.status, 400);
    assert.equal(together.body.error.param, "conversation");
    assertNotFound(
      await app.call("POST", "/v1/responses", { model: "m", input: "x", conversation: "conv_nope" }),
      "conv_nope",
      "conversation",
    );
  });
});

describe("Responses per tenant (keys on)", () => {
  let app: Running;
  before(async () => {
    const dir = folder();
    writeFileSync(path.join(dir, "keys"), `${ALICE} alice\n${BOB} bob\n`);
    app = await start({ env: { API_KEYS_FILE: path.join(dir, "keys") } });
  });
  after(async () => app.close());

  it("another tenant's responses, items and conversations are 404s to this one, and stay", async () => {
    const response = await app.call("POST", "/v1/responses", { model: "m", input: "secret" }, ALICE);
    const conversation = await app.call(
      "POST",
      "/v1/conversations",
      { items: [{ role: "user", content: "c" }] },
      ALICE,
    );
    const { id } = response.body;
    const conv = conversation.body.id;
    const itemId = response.body.output[0].id;
    assertNotFound(await app.call("GET", `/v1/responses/${id}`, undefined, BOB), id);
    assertNotFound(await app.call("GET", `/v1/responses/${id}/input_items`, undefined, BOB), id);
    assertNotFound(await app.call("DELETE", `/v1/responses/${id}`, undefined, BOB), id);
    assertNotFound(
      await app.call("POST", "/v1/responses", { model: "m", input: "x", previous_response_id: id }, BOB),
      id,
      "previous_response_id",
    );
    assertNotFound(
      await app.call(
        "POST",
        "/v1/responses",
        { model: "m", input: [{ type: "item_reference", id: itemId }] },
        BOB,
      ),
      itemId,
      "input.0",
    );
    assertNotFound(await app.call("GET", `/v1/conversations/${conv}`, undefined, BOB), conv);
    assertNotFound(await app.call("GET", `/v1/conversations/${conv}/items`, undefined, BOB), conv);
    assertNotFound(await app.call("DELETE", `/v1/conversations/${conv}`, undefined, BOB), conv);
    assertNotFound(
      await app.call("POST", "/v1/responses", { model: "m", input: "x", conversation: conv }, BOB),
      conv,
      "conversation",
    );
    assert.equal((await app.call("GET", `/v1/responses/${id}`)).status, 401);
    assert.equal((await app.call("GET", `/v1/responses/${id}`, undefined, ALICE)).status, 200);
    assert.equal(
      (await app.call("GET", `/v1/conversations/${conv}/items`, undefined, ALICE)).body.data.length,
      1,
    );
  });
});

describe("Responses past their TTL and past the size bound", () => {
  it("past RESPONSES_TTL (the store's clock moved) a response, its items and a conversation are 404s", async () => {
    const clock = { now: Date.now() };
    const app = await start({ clock, env: { RESPONSES_TTL: "1d" } });
    try {
      const kept = await app.call("POST", "/v1/responses", { model: "m", input: "Hi" });
      const conversation = await app.call("POST", "/v1/conversations", {});
      const { id } = kept.body;
      const conv = conversation.body.id;
      clock.now += DAY - 1000;
      assert.equal((await app.call("GET", `/v1/responses/${id}`)).status, 200);
      assert.equal((await app.call("GET", `/v1/conversations/${conv}`)).status, 200);
      clock.now += 2000;
      assertNotFound(await app.call("GET", `/v1/responses/${id}`), id);
      assertNotFound(await app.call("GET", `/v1/responses/${id}/input_items`), id);
      assertNotFound(
        await app.call("POST", "/v1/responses", { model: "m", input: "x", previous_response_id: id }),
        id,
        "previous_response_id",
      );
      assertNotFound(
        await app.call("POST", "/v1/responses", {
          model: "m",
          input: [{ type: "item_reference", id: kept.body.output[0].id }],
        }),
        kept.body.output[0].id,
        "input.0",
      );
      assertNotFound(await app.call("GET", `/v1/conversations/${conv}`), conv);
      // The sweep then deletes them: nothing is kept but what was made since.
      const fresh = await app.call("POST", "/v1/responses", { model: "m", input: "Hi" });
      await app.app.responsesStore!.sweep();
      const size = await app.app.responsesStore!.sizeBytes();
      assert.ok(size > 0 && size < 4000, `${size} bytes: the one fresh response`);
      assert.equal((await app.call("GET", `/v1/responses/${fresh.body.id}`)).status, 200);
    } finally {
      await app.close();
    }
  });

  it("past RESPONSES_MAX_BYTES the oldest responses go first", async () => {
    const app = await start({ env: { RESPONSES_MAX_BYTES: "64K" } });
    try {
      const ids: string[] = [];
      // Each about 20 KB: 64 KB holds three.
      for (let i = 0; i < 6; i++) {
        const reply = await app.call("POST", "/v1/responses", {
          model: "m",
          input: `${i} ${"x".repeat(20_000)}`,
        });
        ids.push(reply.body.id);
      }
      await app.app.responsesStore!.sweep();
      assert.ok((await app.app.responsesStore!.sizeBytes()) <= 64 * 1024);
      const kept = [];
      for (const id of ids) kept.push((await app.call("GET", `/v1/responses/${id}`)).status);
      assert.deepEqual(kept, [404, 404, 404, 200, 200, 200]);
    } finally {
      await app.close();
    }
  });

  it("RESPONSES_TTL=0 keeps nothing: store says false, no route answers for an id", async () => {
    const app = await start({ env: { RESPONSES_TTL: "0" } });
    try {
      const created = await app.call("POST", "/v1/responses", { model: "m", input: "Hi" });
      assert.equal(created.body.store, false);
      assert.equal((await app.call("GET", `/v1/responses/${created.body.id}`)).status, 404);
      assert.equal((await app.call("POST", "/v1/conversations", {})).status, 404);
    } finally {
      await app.close();
    }
  });
});

describe("Responses survive a restart", () => {
  it("a second app over the same DATA_DIR retrieves and continues what the first kept", async () => {
    const dataDir = folder();
    const first = await start({ dataDir });
    const created = await first.call("POST", "/v1/responses", { model: "m", input: "Remember me." });
    const conversation = await first.call("POST", "/v1/conversations", {
      items: [{ role: "user", content: "c1" }],
    });
    await first.close();

    const second = await start({ dataDir });
    try {
      const retrieved = await second.call("GET", `/v1/responses/${created.body.id}`);
      assert.deepEqual(retrieved.body, created.body);
      const next = await second.call("POST", "/v1/responses", {
        model: "m",
        input: "Who am I?",
        previous_response_id: created.body.id,
      });
      assert.equal(next.status, 200);
      assert.deepEqual(messagesOf(second.generator), [
        "user:Remember me.",
        "assistant:Hello.",
        "user:Who am I?",
      ]);
      const items = await second.call("GET", `/v1/conversations/${conversation.body.id}/items`);
      assert.equal(items.body.data[0].content[0].text, "c1");
    } finally {
      await second.close();
    }
  });
});
