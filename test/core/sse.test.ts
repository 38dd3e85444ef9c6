import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { setImmediate as nextTurn } from "node:timers/promises";
import Fastify from "fastify";
import { openEventStream } from "../../src/core/sse.js";

describe("server-sent events", () => {
  it("keeps every event its own block while gathering a burst into few writes", async () => {
    const app = Fastify();
    app.get("/events", async (request, reply) => {
      const stream = openEventStream(request, reply);
      for (let i = 0; i < 200; i++) {
        stream.send({ token: `t${i}` });
        // Events arrive a turn of the event loop apart, as a generation's tokens do.
        await nextTurn();
      }
      stream.send({ done: true }, "done");
      stream.end();
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const response = await fetch(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/events`);
      assert.equal(response.headers.get("content-type"), "text/event-stream; charset=utf-8");
      let chunks = 0;
      let body = "";
      const decoder = new TextDecoder();
      for await (const chunk of response.body!) {
        chunks++;
        body += decoder.decode(chunk, { stream: true });
      }
      const blocks = body.split("\n\n").filter((block) => block !== "");
      assert.equal(blocks.length, 201);
      blocks.slice(0, 200).forEach((block, i) => assert.equal(block, `data: {"token":"t${i}"}`));
      assert.equal(blocks[200], 'event: done\ndata: {"done":true}');
      assert.ok(chunks < 100, `200 events should need far fewer than 200 writes, got ${chunks}`);
    } finally {
      await app.close();
    }
  });

  it("reports the stream closed once the client has gone", async () => {
    const app = Fastify();
    let sent = 0;
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    app.get("/events", async (request, reply) => {
      const stream = openEventStream(request, reply);
      while (sent < 100_000 && !stream.closed) {
        stream.send({ token: sent++ });
        await nextTurn();
      }
      stream.end();
      finished();
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const controller = new AbortController();
      const response = await fetch(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/events`, {
        signal: controller.signal,
      });
      const reader = response.body!.getReader();
      await reader.read();
      controller.abort();
      await done;
      assert.ok(sent < 100_000, "the producer saw the stream close and stopped");
    } finally {
      await app.close();
    }
  });
});
