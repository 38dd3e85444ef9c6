import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startTextgen, type RunningTextgen } from "../helpers/servers.js";

/** Response bodies are read loosely: the assertions check their shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

const story = "Once upon a time there was a little girl named Lily. She loved to play in the park. ".repeat(
  6,
);

async function complete(server: RunningTextgen, body: object) {
  const response = await fetch(`${server.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ max_tokens: 16, temperature: 0, ...body }),
  });
  const json = (await response.json()) as Loose;
  assert.equal(response.status, 200, JSON.stringify(json));
  return {
    text: json.choices[0].text as string,
    promptTokens: json.usage.prompt_tokens as number,
    cached: json.usage.prompt_tokens_details.cached_tokens as number,
  };
}

describe("prompt cache", () => {
  let server: RunningTextgen;

  before(async () => {
    server = await startTextgen();
  });
  after(async () => server.close());

  it("a repeated prefix is reused and reported as cached_tokens; answers are identical without the cache", async () => {
    const first = await complete(server, { prompt: `${story} One day`, cache_prompt: false });
    assert.equal(first.cached, 0);
    const warm = await complete(server, { prompt: `${story} One day` });
    // Everything but the last prompt token, whose logits start the answer.
    assert.equal(warm.cached, warm.promptTokens - 1);
    assert.equal(warm.text, first.text);
    const question = await complete(server, { prompt: `${story} What did Lily like?` });
    assert.ok(question.cached >= first.promptTokens - 4, `shared prefix reused (${question.cached})`);
    const cold = await complete(server, { prompt: `${story} What did Lily like?`, cache_prompt: false });
    assert.equal(cold.cached, 0);
    assert.equal(question.text, cold.text);
  });

  it("chat: a conversation's history is reused by its next turn", async () => {
    const messages = [
      { role: "system", content: story },
      { role: "user", content: "Tell me about Lily." },
    ];
    const chat = async (body: object) => {
      const response = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ max_tokens: 8, temperature: 0, ...body }),
      });
      return (await response.json()) as Loose;
    };
    const turn = await chat({ messages });
    const next = await chat({
      messages: [
        ...messages,
        { role: "assistant", content: turn.choices[0].message.content },
        { role: "user", content: "And then?" },
      ],
    });
    assert.ok(next.usage.prompt_tokens_details.cached_tokens >= turn.usage.prompt_tokens - 2);
  });
});

describe("prompt cache eviction, two sequences in one context", () => {
  let server: RunningTextgen;

  before(async () => {
    server = await startTextgen({ MAX_CONCURRENT: "2", LLAMA_CONTEXTS: "1" });
  });
  after(async () => server.close());

  it("the least recently used sequence's cells give way", async () => {
    const prompts = [
      "The dog ran to the big red ball.",
      "Tom had a small blue boat.",
      "The sun was hot and bright.",
    ].map((text) => `${text} ${text} ${text}`);
    const [a, b, c] = prompts as [string, string, string];
    await complete(server, { prompt: a });
    await complete(server, { prompt: b });
    // Both are cached: A is still there after B.
    assert.ok((await complete(server, { prompt: a })).cached > 10);
    // C takes the least recently used sequence, B's.
    assert.ok((await complete(server, { prompt: c })).cached <= 1);
    assert.ok((await complete(server, { prompt: a })).cached > 10, "A, used more recently, survived");
    assert.ok((await complete(server, { prompt: b })).cached <= 1, "B was evicted");
  });
});
