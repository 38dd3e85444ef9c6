/**
 * Every request field either changes the answer or is refused by name (issue #15, "no field silently
 * ignored"), plus the small routes clients expect: GET /v1/models/{id}, /tokenize, /detokenize.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testModelName } from "../helpers/env.js";
import { startTextgen, type RunningTextgen } from "../helpers/servers.js";

/** Response bodies are read loosely: the assertions check their shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

describe("request fields and small routes on the test model", () => {
  let server: RunningTextgen;

  before(async () => {
    server = await startTextgen();
  });
  after(async () => server.close());

  async function request(method: string, path: string, body?: object) {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: body ? { "content-type": "application/json" } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: response.status, body: (await response.json()) as Loose };
  }
  const complete = async (body: object) => {
    const { status, body: json } = await request("POST", "/v1/completions", {
      prompt: "Once upon a time",
      max_tokens: 40,
      ...body,
    });
    assert.equal(status, 200, JSON.stringify(json));
    return json.choices[0].text as string;
  };

  it("a raw prompt past 32,768 characters (/v1/completions, /api/generate) meets the context check, not a length cap; past MAX_TOKENIZE_CHARS a 413", async () => {
    // A coding agent's prefix alone is tens of thousands of tokens; the test model's context is 512.
    const long = "Once upon a time there was a little girl named Lily. ".repeat(800);
    assert.ok(long.length > 40_000);
    const completion = await request("POST", "/v1/completions", { prompt: long, max_tokens: 4 });
    const generate = await request("POST", "/api/generate", {
      model: testModelName,
      prompt: long,
      stream: false,
      options: { num_predict: 4 },
    });
    for (const { status, body } of [completion, generate]) {
      const message = JSON.stringify(body);
      assert.equal(status, 400, message);
      assert.doesNotMatch(message, /characters/);
      assert.match(message, /context/i);
    }
    const huge = "Once upon a time. ".repeat(8_000);
    assert.ok(huge.length > 131_072);
    const tooLong = await request("POST", "/v1/completions", { prompt: huge, max_tokens: 4 });
    assert.equal(tooLong.status, 413, JSON.stringify(tooLong.body));
    assert.match(tooLong.body.error.message, /MAX_TOKENIZE_CHARS/);
  });

  it("top_k and min_p are honoured: top_k 1 or min_p 1 make random sampling greedy", async () => {
    const greedy = await complete({ temperature: 0 });
    const random = await complete({ temperature: 2, seed: 5 });
    assert.notEqual(random, greedy, "this seed at temperature 2 leaves the greedy path");
    assert.equal(await complete({ temperature: 2, seed: 5, top_k: 1 }), greedy);
    assert.equal(await complete({ temperature: 2, seed: 5, min_p: 1 }), greedy);
  });

  it("repeat_penalty, presence_penalty and frequency_penalty each change a greedy answer", async () => {
    const greedy = await complete({ temperature: 0 });
    assert.notEqual(await complete({ temperature: 0, repeat_penalty: 2 }), greedy);
    assert.notEqual(await complete({ temperature: 0, presence_penalty: 2 }), greedy);
    assert.notEqual(await complete({ temperature: 0, frequency_penalty: 2 }), greedy);
  });

  it("seed -1 means a random seed, as in llama.cpp", async () => {
    const { status } = await request("POST", "/v1/chat/completions", {
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 4,
      seed: -1,
    });
    assert.equal(status, 200);
  });

  it("a field no reference defines is ignored and named in x-lectern-ignored-fields; a wrong type is a 400", async () => {
    const post = (path: string, body: object) =>
      fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const ignored = await post("/v1/chat/completions", {
      messages: [{ role: "user", content: "Hi", cache_hint: 1 }],
      max_tokens: 2,
      best_of: 2,
    });
    assert.equal(ignored.status, 200);
    assert.equal(ignored.headers.get("x-lectern-ignored-fields"), "messages.0.cache_hint, best_of");
    // null means "not set" in OpenAI's API: a known field sent as null is no error and not "ignored".
    const nulls = await post("/v1/chat/completions", {
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 2,
      logit_bias: null,
      seed: null,
    });
    assert.equal(nulls.status, 200);
    assert.equal(nulls.headers.get("x-lectern-ignored-fields"), null);
    // suffix is in the completions reference: accepted (no effect), not ignored.
    const suffix = await post("/v1/completions", { prompt: "Hi", suffix: "end", max_tokens: 2 });
    assert.equal(suffix.status, 200);
    assert.equal(suffix.headers.get("x-lectern-ignored-fields"), null);
    const wrongType = await post("/v1/chat/completions", {
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: "two",
    });
    assert.equal(wrongType.status, 400);
    const body = (await wrongType.json()) as Loose;
    assert.equal(body.error.type, "invalid_request_error");
    assert.match(body.error.message, /max_tokens/);
  });

  it("logit_bias bans and forces tokens; ignore_eos generates past the end-of-generation token", async () => {
    const eos = 2; // the test model's EOS (its README)
    const usage = async (body: object) => {
      const { status, body: json } = await request("POST", "/v1/completions", {
        prompt: "Once upon a time",
        max_tokens: 10,
        temperature: 0,
        ...body,
      });
      assert.equal(status, 200, JSON.stringify(json));
      return { text: json.choices[0].text as string, finish: json.choices[0].finish_reason as string };
    };
    const greedy = await usage({});
    const tokenize = async (content: string) =>
      (await request("POST", "/tokenize", { content })).body.tokens as number[];
    const firstToken = (await tokenize(`Once upon a time${greedy.text}`))[
      (await tokenize("Once upon a time")).length
    ];
    // Banning the greedy first token changes the answer's start.
    const banned = await usage({ logit_bias: { [firstToken!]: -100 } });
    assert.notEqual(banned.text.slice(0, 3), greedy.text.slice(0, 3));
    // Forcing end-of-generation ends the answer at once, unless ignore_eos bans it again.
    assert.deepEqual(await usage({ logit_bias: { [eos]: 100 } }), { text: "", finish: "stop" });
    const ignored = await usage({ logit_bias: { [eos]: 100 }, ignore_eos: true });
    assert.equal(ignored.finish, "length");
    assert.ok(ignored.text.length > 0);
    // /predict reads the same fields.
    const predicted = await request("POST", "/predict", {
      text: "Once upon a time",
      max_length: 10,
      temperature: 0,
      logit_bias: { [eos]: 100 },
      ignore_eos: true,
    });
    assert.equal(predicted.status, 200);
    assert.equal(predicted.body.generated_text, ignored.text);
    // Not a token id, or not a token of this model: a 400 naming the key, before anything runs.
    for (const key of ["x", "99999"]) {
      const bad = await request("POST", "/v1/completions", { prompt: "Hi", logit_bias: { [key]: 5 } });
      assert.equal(bad.status, 400, key);
      assert.equal(bad.body.error.param, `logit_bias.${key}`);
    }
    const outOfRange = await request("POST", "/v1/completions", { prompt: "Hi", logit_bias: { "5": 101 } });
    assert.equal(outOfRange.status, 400);
  });

  it("a list of prompts gives one choice each, each as that prompt alone", async () => {
    const prompts = ["Once upon a time", "The dog"];
    const { status, body } = await request("POST", "/v1/completions", {
      prompt: prompts,
      max_tokens: 6,
      temperature: 0,
    });
    assert.equal(status, 200);
    assert.deepEqual(
      body.choices.map((choice: Loose) => choice.index),
      [0, 1],
    );
    for (const [i, prompt] of prompts.entries()) {
      const alone = await request("POST", "/v1/completions", { prompt, max_tokens: 6, temperature: 0 });
      assert.equal(body.choices[i].text, alone.body.choices[0].text);
    }
    assert.equal(body.usage.completion_tokens, 12);
    const one = await request("POST", "/v1/completions", { prompt: ["Hi"], max_tokens: 2 });
    assert.equal(one.body.choices.length, 1);
  });

  it("chat takes content-part arrays and developer messages", async () => {
    const { status, body } = await request("POST", "/v1/chat/completions", {
      messages: [
        { role: "developer", content: "Be brief." },
        {
          role: "user",
          content: [
            { type: "text", text: "Tell me " },
            { type: "text", text: "a story." },
          ],
        },
      ],
      max_tokens: 4,
    });
    assert.equal(status, 200);
    assert.equal(typeof body.choices[0].message.content, "string");
  });

  it("a prompt too long for its share of the context: a 400 naming max_tokens, or truncated on request", async () => {
    const long = "Once upon a time there was a cat. ".repeat(300);
    const refused = await request("POST", "/v1/completions", { prompt: long, max_tokens: 10 });
    assert.equal(refused.status, 400);
    assert.match(refused.body.error.message, /max_tokens 10/);
    assert.doesNotMatch(refused.body.error.message, /max_length/);
    const truncated = await request("POST", "/v1/completions", {
      prompt: long,
      max_tokens: 10,
      truncate: true,
      temperature: 0,
    });
    assert.equal(truncated.status, 200);
    assert.equal(truncated.body.usage.completion_tokens, 10);
    assert.ok(truncated.body.usage.prompt_tokens <= 1024 - 10);
  });

  it("GET /v1/models/{id} answers the served model with a stable created, 404 otherwise", async () => {
    const list = await request("GET", "/v1/models");
    const one = await request("GET", `/v1/models/${testModelName}`);
    assert.equal(one.status, 200);
    assert.deepEqual(one.body, list.body.data[0]);
    assert.equal(one.body.object, "model");
    const again = await request("GET", `/v1/models/${testModelName}`);
    assert.equal(again.body.created, one.body.created);
    const missing = await request("GET", "/v1/models/gpt-4");
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.type, "not_found_error");
  });

  it("/tokenize and /detokenize in llama.cpp server's shapes", async () => {
    const plain = await request("POST", "/tokenize", { content: "Once upon a time" });
    assert.equal(plain.status, 200);
    const tokens = plain.body.tokens as number[];
    assert.ok(tokens.length > 0 && tokens.every((token) => Number.isInteger(token)));
    const special = await request("POST", "/tokenize", { content: "Once upon a time", add_special: true });
    assert.deepEqual(special.body.tokens, [1, ...tokens], "BOS (1) first");
    const pieces = await request("POST", "/tokenize", { content: "Once upon a time", with_pieces: true });
    assert.deepEqual(
      pieces.body.tokens.map((piece: Loose) => piece.id),
      tokens,
    );
    assert.equal(pieces.body.tokens.map((piece: Loose) => piece.piece).join(""), " Once upon a time");
    const back = await request("POST", "/detokenize", { tokens });
    assert.equal(back.status, 200);
    assert.equal(back.body.content.trim(), "Once upon a time");
    const bad = await request("POST", "/detokenize", { tokens: [5, 100000] });
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /tokens\[1\]/);
  });
});
