/**
 * The Batch API's hook (issue #36) through the real service and batcher: with every sequence held by
 * batch lines, an interactive request preempts one and starts at the next step; the line is told it
 * was preempted (to be submitted again) and its sequence's cells stay for its retry.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { buildTextgenApp } from "../../../src/textgen/app.js";
import { createGenerator } from "../../../src/textgen/engine/create-generator.js";
import type { CompletionRequest } from "../../../src/textgen/engine/generator.js";
import { PreemptedError } from "../../../src/textgen/engine/scheduler.js";
import type { TextgenService } from "../../../src/textgen/engine/service.js";
import { testConfig } from "../../helpers/env.js";

describe("batch lines give way to interactive requests", () => {
  let service: TextgenService;
  let close: () => Promise<void>;

  before(async () => {
    const config = testConfig({ MAX_CONCURRENT: "1", LLAMA_CONTEXT_SIZE: "512" });
    const app = await buildTextgenApp({ config, generator: createGenerator(config) });
    service = app.textgenService;
    close = () => app.close();
    await service.resolveModel(undefined, "generate").preload();
  });
  after(() => close());

  it("an interactive request waits at most one step behind a running batch line", async () => {
    const model = service.resolveModel(undefined, "generate");
    let batchTokens = 0;
    let started!: () => void;
    const batchStarted = new Promise<void>((resolve) => (started = resolve));
    const line: CompletionRequest = {
      prompt: "Once upon a time, in a big forest, there lived",
      maxTokens: 400,
      temperature: 0,
      stop: [],
      ignoreEos: true,
      onTokens: (count) => {
        batchTokens += count;
        if (batchTokens >= 5) started();
      },
    };
    const batch = model
      .run({ ...line, priority: "batch" }, new AbortController().signal)
      .catch((error: unknown) => error);
    await batchStarted;
    const atArrival = batchTokens;
    let atStart = -1;
    const interactive = await model.run(
      { prompt: "The dog", maxTokens: 8, temperature: 0, stop: [] },
      new AbortController().signal,
      (event) => {
        if (event.type === "start") atStart = batchTokens;
      },
    );
    assert.equal(interactive.tokensGenerated, 8);
    // The step in flight when it arrived finishes (a native step is not interrupted), and its tokens
    // are counted as the next one starts: at most two more of the line's tokens, never the 400.
    assert.ok(atStart - atArrival <= 2, `the line generated ${atStart - atArrival} tokens meanwhile`);
    assert.ok((await batch) instanceof PreemptedError);
    // Submitted again, the line runs.
    const retried = await model.run(
      { ...line, maxTokens: 4, onTokens: undefined, priority: "batch" },
      new AbortController().signal,
    );
    assert.equal(retried.tokensGenerated, 4);
  });
});
