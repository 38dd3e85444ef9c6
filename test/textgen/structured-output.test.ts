import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { sseEvents, startTextgen, type RunningTextgen } from "../helpers/servers.js";

/** Response bodies are read loosely: the assertions check their shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

/** A schema every answer must match; bounded strings so even random sampling finishes in budget. */
const personSchema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 12 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    mood: { enum: ["happy", "sad"] },
    friends: { type: "array", items: { type: "string", maxLength: 8 }, maxItems: 2 },
  },
  required: ["name", "age", "mood", "friends"],
  additionalProperties: false,
};

function assertPerson(text: string): void {
  const value = JSON.parse(text) as Record<string, unknown>;
  assert.deepEqual(Object.keys(value).sort(), ["age", "friends", "mood", "name"]);
  assert.equal(typeof value.name, "string");
  assert.ok((value.name as string).length >= 1 && (value.name as string).length <= 12);
  assert.ok(Number.isInteger(value.age) && (value.age as number) >= 0 && (value.age as number) <= 120);
  assert.ok(["happy", "sad"].includes(value.mood as string));
  assert.ok(Array.isArray(value.friends) && value.friends.length <= 2);
  for (const friend of value.friends as unknown[])
    assert.ok(typeof friend === "string" && friend.length <= 8);
}

describe("structured output (response_format, json_schema, grammar) on the test model", () => {
  let server: RunningTextgen;

  before(async () => {
    server = await startTextgen();
  });
  after(async () => server.close());

  async function post(path: string, body: unknown) {
    const response = await fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Loose };
  }

  const chat = (extra: object) => ({
    messages: [{ role: "user", content: "Describe a girl in the story." }],
    max_tokens: 200,
    ...extra,
  });

  it("json_schema: every answer parses and matches, at temperature 0 and under random sampling", async () => {
    const format = {
      type: "json_schema",
      json_schema: { name: "person", schema: personSchema, strict: true },
    };
    const greedy = await post("/v1/chat/completions", chat({ temperature: 0, response_format: format }));
    assert.equal(greedy.status, 200);
    assert.equal(greedy.body.choices[0].finish_reason, "stop");
    assertPerson(greedy.body.choices[0].message.content);
    for (const seed of [1, 2, 3, 4]) {
      const sampled = await post(
        "/v1/chat/completions",
        chat({ temperature: 1.5, seed, response_format: format }),
      );
      assert.equal(sampled.status, 200);
      assertPerson(sampled.body.choices[0].message.content);
    }
  });

  it("json_object: the answer is a JSON object", async () => {
    const { status, body } = await post(
      "/v1/chat/completions",
      chat({ temperature: 0, response_format: { type: "json_object" } }),
    );
    assert.equal(status, 200);
    const value: unknown = JSON.parse(body.choices[0].message.content);
    assert.ok(typeof value === "object" && value !== null && !Array.isArray(value));
  });

  it("streams a json_schema answer whose pieces add up to the plain answer", async () => {
    const request = chat({
      temperature: 0,
      response_format: { type: "json_schema", json_schema: { name: "person", schema: personSchema } },
    });
    const plain = await post("/v1/chat/completions", request);
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...request, stream: true }),
    });
    let text = "";
    let pieces = 0;
    for await (const event of sseEvents(response)) {
      if (event.data === "[DONE]") break;
      const content = (JSON.parse(event.data) as Loose).choices[0]?.delta?.content;
      if (content) {
        text += content;
        pieces++;
      }
    }
    assert.ok(pieces > 1, "the object arrives in pieces");
    assert.equal(text, plain.body.choices[0].message.content);
    assertPerson(text);
  });

  it("/v1/completions takes json_schema and GBNF grammar fields, as llama.cpp's server names them", async () => {
    const schema = await post("/v1/completions", {
      prompt: "Once upon a time",
      json_schema: personSchema,
      max_tokens: 200,
      temperature: 0,
    });
    assert.equal(schema.status, 200);
    assertPerson(schema.body.choices[0].text);
    const grammar = await post("/v1/completions", {
      prompt: "Once upon a time",
      grammar: 'root ::= ("yes" | "no") "!"',
      max_tokens: 10,
      temperature: 0,
    });
    assert.equal(grammar.status, 200);
    assert.match(grammar.body.choices[0].text, /^(yes|no)!$/);
    assert.equal(grammar.body.choices[0].finish_reason, "stop");
  });

  it("/predict takes json_schema and grammar too", async () => {
    const { status, body } = await post("/predict", {
      text: "Once upon a time",
      grammar: "root ::= [a-c]{3}",
      max_length: 10,
      temperature: 0,
    });
    assert.equal(status, 200);
    assert.match(body.generated_text, /^[a-c]{3}$/);
    const json = await post("/predict", {
      text: "Once upon a time",
      json_schema: personSchema,
      max_length: 200,
      temperature: 0,
    });
    assert.equal(json.status, 200);
    assertPerson(json.body.generated_text);
  });

  it("pattern and format uuid are enforced; format uri is dropped and named in x-lectern-unenforced", async () => {
    const schema = {
      type: "object",
      properties: {
        code: { type: "string", pattern: "^[A-Z]{2}-[0-9]{2}$" },
        id: { type: "string", format: "uuid" },
        link: { type: "string", format: "uri", maxLength: 10 },
      },
      required: ["code", "id", "link"],
      additionalProperties: false,
    };
    for (const sampling of [{ temperature: 0 }, { temperature: 1.5, seed: 3 }]) {
      const response = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(
          chat({ response_format: { type: "json_schema", json_schema: { name: "x", schema } }, ...sampling }),
        ),
      });
      assert.equal(response.status, 200);
      assert.equal(
        response.headers.get("x-lectern-unenforced"),
        "response_format.json_schema.schema.properties.link.format",
      );
      const body = (await response.json()) as Loose;
      const value = JSON.parse(body.choices[0].message.content) as Record<string, string>;
      assert.match(value.code!, /^[A-Z]{2}-[0-9]{2}$/);
      assert.match(value.id!, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
      assert.ok(value.link!.length <= 10);
    }
    // strict: a format the grammar cannot enforce is refused, naming it.
    const refused = await post(
      "/v1/chat/completions",
      chat({ response_format: { type: "json_schema", json_schema: { name: "x", schema, strict: true } } }),
    );
    assert.equal(refused.status, 400);
    assert.match(refused.body.error.message, /properties\.link\.format/);
  });

  it("a schema or grammar that cannot be compiled is a 400 naming the problem", async () => {
    // pattern is enforced since issue #34; a keyword the grammar cannot enforce is refused when strict.
    const badKeyword = await post(
      "/v1/chat/completions",
      chat({
        response_format: {
          type: "json_schema",
          json_schema: {
            name: "x",
            strict: true,
            schema: { type: "object", properties: { id: { type: "string", not: { const: "a" } } } },
          },
        },
      }),
    );
    assert.equal(badKeyword.status, 400);
    assert.equal(badKeyword.body.error.type, "invalid_request_error");
    assert.match(badKeyword.body.error.message, /properties\.id\.not/);
    const badType = await post(
      "/v1/chat/completions",
      chat({
        response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "strng" } } },
      }),
    );
    assert.equal(badType.status, 400);
    assert.match(badType.body.error.message, /unknown type "strng"/);
    const badRef = await post(
      "/v1/chat/completions",
      chat({
        response_format: { type: "json_schema", json_schema: { name: "x", schema: { $ref: "http://x/y" } } },
      }),
    );
    assert.equal(badRef.status, 400);
    assert.match(badRef.body.error.message, /\$ref/);
    const badGrammar = await post("/v1/completions", { prompt: "Hi", grammar: "root ::= missing-rule" });
    assert.equal(badGrammar.status, 400);
    assert.match(badGrammar.body.error.message, /missing-rule/);
    const noRoot = await post("/v1/completions", { prompt: "Hi", grammar: 'answer ::= "yes"' });
    assert.equal(noRoot.status, 400);
    assert.match(noRoot.body.error.message, /root/);
    const both = await post("/v1/completions", { prompt: "Hi", grammar: 'root ::= "a"', json_schema: {} });
    assert.equal(both.status, 400);
  });
});
