import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { testModelName } from "../helpers/env.js";
import { readMetric, sseEvents, startTextgen } from "../helpers/servers.js";

const post = (url: string, body: unknown) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

interface Predicted {
  generated_text: string;
  tokens_generated: number;
  finish_reason: string;
  prompt_tokens: number;
}
const predicted = async (response: Response | Promise<Response>) =>
  (await (await response).json()) as Predicted;

/**
 * Polls a metric until `accept` holds. What the server does is observed, not waited out: no sleep
 * stands for "long enough"; the test's own timeout bounds a condition that never comes.
 */
async function metricBecomes(url: string, name: string, accept: (value: number) => boolean): Promise<number> {
  for (;;) {
    const value = await readMetric(url, name);
    if (accept(value)) return value;
    await sleep(10);
  }
}

describe("serving many clients", () => {
  it("four concurrent /predict requests all finish with correct token counts", async () => {
    const server = await startTextgen({ MAX_CONCURRENT: "4" });
    try {
      const prompts = ["Once upon a time", "The dog", "Lily saw a", "One day"];
      const serial: Predicted[] = [];
      for (const text of prompts)
        serial.push(await predicted(post(`${server.url}/predict`, { text, max_length: 24, temperature: 0 })));
      const concurrent = await Promise.all(
        prompts.map((text) =>
          predicted(post(`${server.url}/predict`, { text, max_length: 24, temperature: 0 })),
        ),
      );
      for (let i = 0; i < prompts.length; i++) {
        assert.equal(concurrent[i]!.tokens_generated, 24);
        assert.equal(concurrent[i]!.finish_reason, "length");
        // Batched sequences give each request the same tokens as running it alone.
        assert.equal(concurrent[i]!.generated_text, serial[i]!.generated_text);
      }
    } finally {
      await server.close();
    }
  });

  it("/predict stream: one event per token piece, then the whole response", async () => {
    const server = await startTextgen();
    try {
      const plain = await predicted(
        post(`${server.url}/predict`, { text: "Once upon a time", max_length: 12, temperature: 0 }),
      );
      const response = await post(`${server.url}/predict`, {
        text: "Once upon a time",
        max_length: 12,
        temperature: 0,
        stream: true,
      });
      assert.equal(response.status, 200);
      assert.match(response.headers.get("content-type") ?? "", /text\/event-stream/);
      let text = "";
      let pieces = 0;
      let done: Record<string, unknown> | undefined;
      for await (const { event, data } of sseEvents(response)) {
        if (event === "done") done = JSON.parse(data);
        else {
          text += (JSON.parse(data) as { token: string }).token;
          pieces++;
        }
      }
      assert.ok(done, "a last event holds the response");
      assert.equal(done.generated_text, plain.generated_text);
      assert.equal(done.tokens_generated, 12);
      assert.equal(text, plain.generated_text);
      assert.ok(pieces >= 1 && pieces <= 12);
    } finally {
      await server.close();
    }
  });

  it("a streaming client that disconnects after 3 events stops its generation", async () => {
    const server = await startTextgen({ MAX_CONCURRENT: "1" });
    try {
      const before = await readMetric(server.url, "lectern_generated_tokens_total");
      const controller = new AbortController();
      const response = await fetch(`${server.url}/predict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text: "Once upon a time", max_length: 2000, temperature: 0, stream: true }),
        signal: controller.signal,
      });
      let events = 0;
      for await (const _ of sseEvents(response)) {
        if (++events === 3) break;
      }
      controller.abort();
      // The sequence is given back once the generation has stopped: nothing more can be counted after.
      await metricBecomes(server.url, "lectern_running_generations", (running) => running === 0);
      const generated = (await readMetric(server.url, "lectern_generated_tokens_total")) - before;
      // 2000 tokens take seconds here (~300 tokens/s): stopping early is what kept it short of them.
      assert.ok(generated < 2000, `generated ${generated} tokens before stopping`);
      // And the sequence is free again: the next request is served at once.
      const next = await post(`${server.url}/predict`, { text: "Once", max_length: 3 });
      assert.equal(next.status, 200);
    } finally {
      await server.close();
    }
  });

  it("a non-streaming client that disconnects stops its generation too", async () => {
    const server = await startTextgen({ MAX_CONCURRENT: "1" });
    try {
      const before = await readMetric(server.url, "lectern_generated_tokens_total");
      const req = httpRequest(`${server.url}/predict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
      });
      req.on("error", () => {});
      req.end(JSON.stringify({ text: "Once upon a time", max_length: 2000, temperature: 0 }));
      // Leave once tokens are being generated, not after a guessed delay.
      await metricBecomes(server.url, "lectern_generated_tokens_total", (tokens) => tokens > before);
      req.destroy();
      await metricBecomes(server.url, "lectern_running_generations", (running) => running === 0);
      const generated = (await readMetric(server.url, "lectern_generated_tokens_total")) - before;
      assert.ok(generated < 2000, `generated ${generated} of 2000`);
    } finally {
      await server.close();
    }
  });

  it("queue overflow is answered 429 with Retry-After", async () => {
    const server = await startTextgen({ MAX_CONCURRENT: "1", MAX_QUEUE: "1" });
    try {
      const long = { text: "Once upon a time", max_length: 1200, temperature: 0 };
      /** One running and one queued, as the server's own gauges say, before the request that overflows. */
      const fill = async () => {
        const running = post(`${server.url}/predict`, long);
        await metricBecomes(server.url, "lectern_running_generations", (n) => n === 1);
        const queued = post(`${server.url}/predict`, long);
        await metricBecomes(server.url, "lectern_queue_depth", (n) => n === 1);
        return [running, queued];
      };
      const [first, second] = await fill();
      const third = await post(`${server.url}/predict`, long);
      assert.equal(third.status, 429);
      assert.ok(Number(third.headers.get("retry-after")) >= 1);
      const body = (await third.json()) as { error: { code: string; message: string } };
      assert.equal(body.error.code, "queue_full");
      assert.equal((await first!).status, 200);
      assert.equal((await second!).status, 200);
      // The OpenAI routes say the same in OpenAI's shape.
      const [a, b] = await fill();
      const c = await post(`${server.url}/v1/completions`, { prompt: "hi", max_tokens: 5 });
      assert.equal(c.status, 429);
      assert.equal(((await c.json()) as { error: { type: string } }).error.type, "rate_limit_error");
      await Promise.all([a, b]);
    } finally {
      await server.close();
    }
  });

  it("a request past REQUEST_TIMEOUT_MS gets 504 and frees its sequence", async () => {
    const server = await startTextgen({ MAX_CONCURRENT: "1", REQUEST_TIMEOUT_MS: "300" });
    try {
      const before = await readMetric(server.url, "lectern_generated_tokens_total");
      const res = await post(`${server.url}/predict`, {
        text: "Once upon a time",
        max_length: 2000,
        temperature: 0,
      });
      assert.equal(res.status, 504);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, "timeout");
      // The sequence comes back once the generation has stopped.
      await metricBecomes(server.url, "lectern_running_generations", (running) => running === 0);
      const generated = (await readMetric(server.url, "lectern_generated_tokens_total")) - before;
      assert.ok(generated < 2000, `generated ${generated} of 2000: the generation was not stopped`);
      const next = await post(`${server.url}/predict`, { text: "Once", max_length: 3 });
      assert.equal(next.status, 200);
    } finally {
      await server.close();
    }
  });

  it("serves from an OpenAI-compatible upstream (GENERATION_UPSTREAM_URL), streaming included", async () => {
    const upstream = await startTextgen();
    const front = await startTextgen({ GENERATION_UPSTREAM_URL: `${upstream.url}/v1` });
    try {
      const health = (await (await fetch(`${front.url}/health`)).json()) as {
        status: string;
        model_name: string;
      };
      // The upstream's own id for its model (its file name), as its /v1/models lists it.
      assert.deepEqual(health, { status: "healthy", model_name: testModelName, model_loaded: true });
      const direct = await predicted(
        post(`${upstream.url}/predict`, { text: "Once upon a time", max_length: 10, temperature: 0 }),
      );
      const via = await predicted(
        post(`${front.url}/predict`, { text: "Once upon a time", max_length: 10, temperature: 0 }),
      );
      assert.equal(via.generated_text, direct.generated_text);
      assert.equal(via.tokens_generated, 10);
      assert.equal(via.prompt_tokens, direct.prompt_tokens);
      const streamed = await post(`${front.url}/predict`, {
        text: "Once upon a time",
        max_length: 10,
        temperature: 0,
        stream: true,
      });
      let text = "";
      for await (const { event, data } of sseEvents(streamed))
        if (event !== "done") text += JSON.parse(data).token;
      assert.equal(text, direct.generated_text);
      // A chat history with a tool call and its result goes upstream in OpenAI's shape.
      const history = await post(`${front.url}/v1/chat/completions`, {
        messages: [
          { role: "user", content: "Weather?" },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "call_1", type: "function", function: { name: "w", arguments: "{}" } }],
          },
          { role: "tool", tool_call_id: "call_1", content: "sunny" },
        ],
        max_tokens: 3,
      });
      assert.equal(history.status, 200);
      // What runs inside our own batcher is refused, by name, rather than dropped on the way.
      const constrained = await post(`${front.url}/v1/chat/completions`, {
        messages: [{ role: "user", content: "Hi" }],
        response_format: { type: "json_object" },
      });
      assert.equal(constrained.status, 400);
      assert.match(
        ((await constrained.json()) as { error: { message: string } }).error.message,
        /GENERATION_UPSTREAM_URL/,
      );
      await upstream.close();
      const down = await post(`${front.url}/predict`, { text: "Once", max_length: 3 });
      assert.equal(down.status, 502);
      assert.equal(((await down.json()) as { error: { code: string } }).error.code, "upstream_error");
    } finally {
      await front.close();
      await upstream.close().catch(() => undefined);
    }
  });
});
