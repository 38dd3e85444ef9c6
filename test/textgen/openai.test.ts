import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import OpenAI from "openai";
import { testModelName } from "../helpers/env.js";
import { startTextgen, type RunningTextgen } from "../helpers/servers.js";

describe("OpenAI-compatible routes, driven by the official openai client", () => {
  let server: RunningTextgen;
  let client: OpenAI;

  before(async () => {
    server = await startTextgen();
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  after(async () => server.close());

  it("lists the model", async () => {
    const models = await client.models.list();
    assert.deepEqual(
      models.data.map((m) => m.id),
      [testModelName],
    );
  });

  it("completions.create returns the continuation with usage counts, deterministic at temperature 0", async () => {
    const request = { model: "llama", prompt: "Once upon a time", max_tokens: 12, temperature: 0 };
    const completion = await client.completions.create(request);
    assert.equal(completion.object, "text_completion");
    assert.equal(completion.choices.length, 1);
    assert.ok(completion.choices[0]!.text.length > 0);
    assert.equal(completion.choices[0]!.finish_reason, "length");
    assert.equal(completion.usage?.completion_tokens, 12);
    assert.ok((completion.usage?.prompt_tokens ?? 0) > 0);
    assert.equal(completion.usage?.total_tokens, completion.usage!.prompt_tokens + 12);
    const again = await client.completions.create(request);
    assert.equal(again.choices[0]!.text, completion.choices[0]!.text);
  });

  it("completions.create with stream yields pieces that add up to the non-streamed text", async () => {
    const plain = await client.completions.create({
      model: "llama",
      prompt: "Once upon a time",
      max_tokens: 10,
      temperature: 0,
    });
    const stream = await client.completions.create({
      model: "llama",
      prompt: "Once upon a time",
      max_tokens: 10,
      temperature: 0,
      stream: true,
    });
    let text = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(text, plain.choices[0]!.text);
    assert.equal(finish, "length");
  });

  it("chat.completions.create answers with the model's chat template", async () => {
    const chat = await client.chat.completions.create({
      model: "llama",
      messages: [
        { role: "system", content: "You tell stories." },
        { role: "user", content: "Tell me about a cat." },
      ],
      max_tokens: 16,
      temperature: 0,
    });
    assert.equal(chat.object, "chat.completion");
    assert.equal(chat.choices[0]!.message.role, "assistant");
    assert.equal(typeof chat.choices[0]!.message.content, "string");
    assert.ok(chat.usage!.completion_tokens >= 1 && chat.usage!.completion_tokens <= 16);
    assert.ok(chat.usage!.prompt_tokens > 5, "the template adds tokens around the messages");
  });

  it("chat.completions.create with stream: true streams deltas, then usage when asked", async () => {
    const request = {
      model: "llama",
      messages: [{ role: "user" as const, content: "Tell me a story." }],
      max_tokens: 16,
      temperature: 0,
      seed: 7,
    };
    const plain = await client.chat.completions.create(request);
    const stream = await client.chat.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let chunks = 0;
    let role: string | undefined;
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      chunks++;
      role ??= chunk.choices[0]?.delta?.role;
      text += chunk.choices[0]?.delta?.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    assert.ok(chunks >= 3);
    assert.equal(role, "assistant");
    assert.equal(text, plain.choices[0]!.message.content);
    assert.ok(finish === "length" || finish === "stop");
    assert.equal(usage?.completion_tokens, plain.usage?.completion_tokens);
  });

  it("stop sequences end generation with finish_reason stop", async () => {
    const completion = await client.completions.create({
      model: "llama",
      prompt: "Once upon a time",
      max_tokens: 30,
      temperature: 0,
      stop: ["Lily"],
    });
    assert.equal(completion.choices[0]!.finish_reason, "stop");
    assert.ok(!completion.choices[0]!.text.includes("Lily"));
  });

  it("errors come in OpenAI's shape and surface as APIError in the client", async () => {
    await assert.rejects(
      client.completions.create({ model: "llama", prompt: "hi", max_tokens: 0 }),
      (error: unknown) => {
        assert.ok(error instanceof OpenAI.APIError);
        assert.equal(error.status, 400);
        const body = error.error as { message: string; type: string };
        assert.equal(body.type, "invalid_request_error");
        assert.match(body.message, /max_tokens/);
        return true;
      },
    );
    await assert.rejects(
      client.chat.completions.create({ model: "llama", messages: [], max_tokens: 4 }),
      (error: unknown) => error instanceof OpenAI.BadRequestError,
    );
    await assert.rejects(
      // n: 2 is served (issue #34); past MAX_CHOICES (16) it is a 400.
      client.chat.completions.create({ model: "llama", messages: [{ role: "user", content: "hi" }], n: 17 }),
      (error: unknown) => error instanceof OpenAI.BadRequestError,
    );
    const raw = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    assert.equal(raw.status, 400);
    const body = (await raw.json()) as { error: { message: string; type: string } };
    assert.equal(body.error.type, "invalid_request_error");
  });
});
