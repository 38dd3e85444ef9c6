import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { sseEvents, startTextgen, type RunningTextgen } from "../helpers/servers.js";

/** Response bodies are read loosely: the assertions check their shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

interface ChatLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

describe("logprobs on the test model", () => {
  let server: RunningTextgen;

  before(async () => {
    server = await startTextgen();
  });
  after(async () => server.close());

  async function post(path: string, body: object) {
    const response = await fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Loose };
  }

  async function streamed(path: string, body: object): Promise<Loose[]> {
    const response = await fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...body, stream: true }),
    });
    const chunks: Loose[] = [];
    for await (const event of sseEvents(response)) {
      if (event.data === "[DONE]") break;
      chunks.push(JSON.parse(event.data));
    }
    return chunks;
  }

  const chatRequest = {
    messages: [{ role: "user", content: "Tell me a story." }],
    max_tokens: 12,
    temperature: 0,
    logprobs: true,
    top_logprobs: 3,
  };

  it("chat: one entry per token in OpenAI's shape; at temperature 0 the token is the most probable", async () => {
    const { status, body } = await post("/v1/chat/completions", chatRequest);
    assert.equal(status, 200);
    const choice = body.choices[0];
    const content = choice.logprobs.content as ChatLogprob[];
    assert.equal(content.length, body.usage.completion_tokens);
    assert.equal(content.map((entry) => entry.token).join(""), choice.message.content);
    for (const entry of content) {
      assert.ok(entry.logprob <= 0);
      assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, "utf8")]);
      assert.equal(entry.top_logprobs.length, 3);
      assert.equal(entry.top_logprobs[0]!.token, entry.token);
      assert.equal(entry.top_logprobs[0]!.logprob, entry.logprob);
      for (let i = 1; i < 3; i++)
        assert.ok(entry.top_logprobs[i - 1]!.logprob >= entry.top_logprobs[i]!.logprob);
    }
  });

  it("chat: without top_logprobs each entry has no alternatives; without logprobs the field is null", async () => {
    const bare = await post("/v1/chat/completions", { ...chatRequest, top_logprobs: undefined });
    assert.ok(
      bare.body.choices[0].logprobs.content.every((entry: ChatLogprob) => entry.top_logprobs.length === 0),
    );
    const none = await post("/v1/chat/completions", {
      ...chatRequest,
      logprobs: undefined,
      top_logprobs: undefined,
    });
    assert.equal(none.body.choices[0].logprobs, null);
  });

  it("top_logprobs above 20 is a 400 naming it", async () => {
    const { status, body } = await post("/v1/chat/completions", { ...chatRequest, top_logprobs: 21 });
    assert.equal(status, 400);
    assert.equal(body.error.param, "top_logprobs");
  });

  it("chat streaming: the chunks' logprobs add up to the plain answer's", async () => {
    const plain = await post("/v1/chat/completions", chatRequest);
    const chunks = await streamed("/v1/chat/completions", chatRequest);
    const entries: ChatLogprob[] = chunks.flatMap((chunk) => chunk.choices[0]?.logprobs?.content ?? []);
    const expected: ChatLogprob[] = plain.body.choices[0].logprobs.content;
    // The same tokens and alternatives; values agree to float precision (the second request reuses
    // the first's cached prompt, evaluated in a different batch).
    assert.deepEqual(
      entries.map((entry) => [entry.token, entry.top_logprobs.map((top) => top.token)]),
      expected.map((entry) => [entry.token, entry.top_logprobs.map((top) => top.token)]),
    );
    entries.forEach((entry, i) => assert.ok(Math.abs(entry.logprob - expected[i]!.logprob) < 1e-3));
  });

  it("completions: logprobs (an int) in the legacy shape, streamed too", async () => {
    const request = { prompt: "Once upon a time", max_tokens: 6, temperature: 0, logprobs: 2 };
    const { status, body } = await post("/v1/completions", request);
    assert.equal(status, 200);
    const { text, logprobs } = body.choices[0];
    assert.equal(logprobs.tokens.length, 6);
    assert.equal(logprobs.tokens.join(""), text);
    assert.equal(logprobs.token_logprobs.length, 6);
    assert.ok(logprobs.top_logprobs.every((top: Record<string, number>) => Object.keys(top).length <= 2));
    assert.deepEqual(
      logprobs.text_offset,
      logprobs.tokens.map((_: string, i: number) => logprobs.tokens.slice(0, i).join("").length),
    );
    const chunks = await streamed("/v1/completions", request);
    const tokens = chunks.flatMap((chunk) => chunk.choices[0]?.logprobs?.tokens ?? []);
    const offsets = chunks.flatMap((chunk) => chunk.choices[0]?.logprobs?.text_offset ?? []);
    assert.deepEqual(tokens, logprobs.tokens);
    assert.deepEqual(offsets, logprobs.text_offset);
  });

  it("completions: echo prepends the prompt, with and without streaming", async () => {
    const request = { prompt: "Once upon a time", max_tokens: 4, temperature: 0 };
    const plain = await post("/v1/completions", request);
    const echoed = await post("/v1/completions", { ...request, echo: true });
    assert.equal(echoed.body.choices[0].text, "Once upon a time" + plain.body.choices[0].text);
    const chunks = await streamed("/v1/completions", { ...request, echo: true });
    assert.equal(chunks.map((chunk) => chunk.choices[0]?.text ?? "").join(""), echoed.body.choices[0].text);
  });
});
