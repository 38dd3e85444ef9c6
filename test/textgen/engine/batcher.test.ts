import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  getLlama,
  LlamaLogLevel,
  type Llama,
  type LlamaContext,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { ContinuousBatcher, type BatchJob } from "../../../src/textgen/engine/batcher.js";
import {
  createNativeSampler,
  nativeContextOf,
  type NativeContext,
  type NativeSampler,
} from "../../../src/textgen/engine/llama-native.js";
import { ResponseText } from "../../../src/textgen/engine/response-text.js";
import { testModelPath } from "../../helpers/env.js";

const SEQUENCES = 4;

describe("ContinuousBatcher on the test model", () => {
  let llama: Llama;
  let model: LlamaModel;
  const contexts: LlamaContext[] = [];

  before(async () => {
    llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
    model = await llama.loadModel({ modelPath: testModelPath });
  });
  after(async () => {
    for (const context of contexts) await context.dispose();
    await model.dispose();
    await llama.dispose();
  });

  /** A batcher over a fresh context; `decodes` counts llama_decode calls. */
  async function makeBatcher(batchSize = 512, failDecode?: () => boolean) {
    const context = await model.createContext({
      contextSize: 256,
      sequences: SEQUENCES,
      threads: 1,
      batchSize,
    });
    contexts.push(context);
    const native = nativeContextOf(context);
    const counter = {
      decodes: 0,
      tokensInBatches: [] as number[],
      batchSequences: [] as number[],
      /** Sequence ids in the order they were added, per step. */
      steps: [] as number[][],
    };
    let tokensThisBatch = 0;
    const counting: NativeContext = {
      initBatch: (size) => {
        tokensThisBatch = 0;
        counter.steps.push([]);
        native.initBatch(size);
      },
      addToBatch: (sequenceId, position, tokens, logits) => {
        tokensThisBatch += tokens.length;
        counter.batchSequences.push(sequenceId);
        counter.steps.at(-1)!.push(sequenceId);
        return native.addToBatch(sequenceId, position, tokens, logits);
      },
      decodeBatch: () => {
        counter.decodes++;
        counter.tokensInBatches.push(tokensThisBatch);
        // Fault injection at the native boundary: llama_decode refusing a batch.
        if (failDecode?.()) return Promise.reject(new Error("llama_decode failed"));
        return native.decodeBatch();
      },
      sampleToken: ((index: number, sampler: NativeSampler, probabilities?: boolean) =>
        native.sampleToken(index, sampler, probabilities as true)) as NativeContext["sampleToken"],
      disposeSequence: (sequenceId) => native.disposeSequence(sequenceId),
      removeTokenCellsFromSequence: (sequenceId, start, end) =>
        native.removeTokenCellsFromSequence(sequenceId, start, end),
      restoreCheckpoint: (checkpoint, maxPosition) => native.restoreCheckpoint(checkpoint, maxPosition),
      setLoras: (adapters, scales) => native.setLoras(adapters, scales),
      setThreads: (threads) => native.setThreads(threads),
    };
    const batcher = new ContinuousBatcher(
      counting,
      {
        isEogToken: (token) => model.isEogToken(token),
        createSampler: () => createNativeSampler(llama, model),
        newlineToken: model.tokens.nl ?? null,
      },
      SEQUENCES,
      batchSize,
    );
    return { batcher, counter };
  }

  function job(prompt: string, overrides: Partial<BatchJob> = {}, stopStrings: string[] = []): BatchJob {
    const tokens: Token[] = [model.tokens.bos!, ...model.tokenize(prompt)];
    return {
      promptTokens: tokens,
      maxTokens: 24,
      sampling: { temperature: 0, topK: 40, topP: 0.95, minP: 0, seed: 1 },
      text: new ResponseText({
        detokenize: (t, last) => model.detokenize(t, false, last),
        context: tokens,
        stopStrings,
      }),
      ...overrides,
    };
  }

  it("decodes concurrent requests together: one llama_decode per step, not one per request", async () => {
    const { batcher, counter } = await makeBatcher();
    const results = await Promise.all(
      [0, 1, 2, 3].map((i) => batcher.run(job(`The dog number ${i} was`, { maxTokens: 32 }))),
    );
    for (const result of results)
      if (result.finish === "length") assert.equal(result.tokensGenerated, 32);
      else assert.ok(result.tokensGenerated < 32);
    const generated = results.reduce((sum, result) => sum + result.tokensGenerated, 0);
    assert.ok(generated > 32, `expected several requests' worth of tokens, got ${generated}`);
    // Four requests started together share every step: about 32 decodes, where serial would need ~128.
    assert.ok(counter.decodes <= 34, `expected ≤ 34 llama_decode calls, got ${counter.decodes}`);
    assert.ok(Math.max(...counter.tokensInBatches) >= 4);
  });

  it("gives a request the same text at temperature 0 alone, batched with others, or with its prompt in chunks", async () => {
    const { batcher } = await makeBatcher();
    const alone = await batcher.run(job("Once upon a time there was a little"));
    const batched = await Promise.all([
      batcher.run(job("Once upon a time there was a little")),
      batcher.run(job("A big red ball")),
      batcher.run(job("Tom and Sue")),
    ]);
    assert.equal(batched[0]!.text, alone.text);
    assert.ok(alone.text.length > 0);

    // A batch of 4 tokens makes the 9-token prompt go in three chunks.
    const small = await makeBatcher(4);
    const chunked = await small.batcher.run(job("Once upon a time there was a little"));
    assert.ok(small.counter.tokensInBatches.every((tokens) => tokens <= 4));
    assert.equal(chunked.text, alone.text);
  });

  it("repeats a seeded sample at temperature > 0, on any sequence, alone or concurrently", async () => {
    const { batcher } = await makeBatcher();
    const seeded = (seed: number) =>
      job("Lily liked to", { sampling: { temperature: 0.9, topK: 40, topP: 0.95, minP: 0, seed } });
    const first = await batcher.run(seeded(42));
    const together = await Promise.all([
      batcher.run(seeded(42)),
      batcher.run(seeded(42)),
      batcher.run(seeded(7)),
    ]);
    assert.equal(together[0]!.text, first.text);
    assert.equal(together[1]!.text, first.text);
  });

  it("stops a request at its stop string and reports it", async () => {
    const { batcher } = await makeBatcher();
    const free = await batcher.run(job("Once upon a time", { maxTokens: 60 }));
    const cut = free.text.indexOf(".");
    assert.ok(cut > 0, `the model's text should contain a period: ${free.text}`);
    const stopped = await batcher.run(job("Once upon a time", { maxTokens: 60 }, ["."]));
    assert.equal(stopped.finish, "stop");
    assert.equal(stopped.text, free.text.slice(0, cut));
  });

  it("ends an aborted request within a step, frees its sequence, and lets the others finish", async () => {
    const { batcher, counter } = await makeBatcher();
    const controller = new AbortController();
    let tokensSeen = 0;
    const aborted = batcher.run(
      job("Once upon a time", {
        maxTokens: 200,
        signal: controller.signal,
        onTokens: (count) => {
          tokensSeen += count;
          if (tokensSeen === 3) controller.abort();
        },
      }),
    );
    const others = [1, 2, 3].map((i) => batcher.run(job(`Story ${i}:`, { maxTokens: 40 })));
    const result = await aborted;
    assert.equal(result.finish, "abort");
    assert.ok(
      result.tokensGenerated <= 5,
      `aborted after 3 tokens, yet ${result.tokensGenerated} were generated`,
    );
    for (const other of await Promise.all(others)) assert.ok(other.tokensGenerated > 0);
    // Every sequence is free again: four more requests run at once.
    const before = counter.decodes;
    const again = await Promise.all(
      [0, 1, 2, 3].map((i) => batcher.run(job(`Again ${i}`, { maxTokens: 8 }))),
    );
    assert.equal(again.length, 4);
    assert.ok(counter.decodes - before <= 10);
  });

  it("gives a new request the free sequence next to the running ones, so a step spans few KV streams", async () => {
    const { batcher, counter } = await makeBatcher();
    // Sequences 0…3 in turn, each keeping its cells; 0 is then the least recently used.
    const prompts = ["The cat sat", "A bird flew", "The sun rose", "One day a boy"];
    for (const prompt of prompts) await batcher.run(job(prompt, { maxTokens: 2 }));
    const inOrder = () => [...new Set(counter.batchSequences.splice(0))];
    assert.deepEqual(inOrder(), [0, 1, 2, 3]);
    // The first reuses sequence 3's cached prompt; the second, fresh, takes 2 (next to 3), not 0.
    await Promise.all([
      batcher.run(job(prompts[3]!, { maxTokens: 8 })),
      batcher.run(job("Far away in a wood", { maxTokens: 8 })),
    ]);
    assert.deepEqual(inOrder().sort(), [2, 3]);
  });

  it("puts a step's sequences in the batch in id order, whatever order they were admitted in", async () => {
    const { batcher, counter } = await makeBatcher();
    const prompts = ["The cat sat", "A bird flew", "The sun rose", "One day a boy"];
    for (const prompt of prompts) await batcher.run(job(prompt, { maxTokens: 2 }));
    counter.steps.length = 0;
    // Each reuses its own cached prompt, so they are admitted as sequences 3, 0, 1, 2.
    await Promise.all([3, 0, 1, 2].map((i) => batcher.run(job(prompts[i]!, { maxTokens: 8 }))));
    assert.ok(
      counter.steps.some((step) => step.length === 4),
      "the four ran in the same steps",
    );
    // llama.cpp decodes a run of consecutive ids as one micro-batch and splits at every break.
    for (const step of counter.steps)
      assert.deepEqual(
        step,
        [...step].sort((a, b) => a - b),
        `a step added sequences ${step.join(", ")}`,
      );
  });

  it("queues requests beyond its sequences and runs them as sequences free up", async () => {
    const { batcher } = await makeBatcher();
    const results = await Promise.all(
      Array.from({ length: SEQUENCES * 2 + 1 }, (_, i) => batcher.run(job(`Tale ${i}`, { maxTokens: 6 }))),
    );
    assert.equal(results.length, SEQUENCES * 2 + 1);
    for (const result of results) assert.ok(result.tokensGenerated > 0 && result.tokensGenerated <= 6);
  });

  it("fails the requests of a step whose decode fails, and serves the next ones", async () => {
    // The decode after the first token of request 0 fails, once.
    let failNext = false;
    let failed = false;
    const { batcher } = await makeBatcher(512, () => {
      if (!failNext || failed) return false;
      failed = true;
      return true;
    });
    const running = [0, 1].map((i) =>
      batcher.run(
        job(`Tale ${i}`, {
          maxTokens: 50,
          onTokens: () => {
            if (i === 0) failNext = true;
          },
        }),
      ),
    );
    for (const outcome of await Promise.allSettled(running)) {
      assert.equal(outcome.status, "rejected");
      assert.match(String((outcome as PromiseRejectedResult).reason), /llama_decode failed/);
    }
    const after = await batcher.run(job("Once upon a time", { maxTokens: 8 }));
    assert.equal(after.tokensGenerated, 8);
  });

  it("fails a request whose sampler settings llama.cpp refuses, at once and alone", async () => {
    const { batcher } = await makeBatcher();
    const other = batcher.run(job("A big red ball", { maxTokens: 12 }));
    // Not a number: the addon throws while configuring the sampler, before the request gets a sequence.
    const refused = job("Once upon a time", { maxTokens: 12 });
    refused.sampling = { ...refused.sampling, temperature: "hot" as unknown as number };
    await assert.rejects(batcher.run(refused), /number/);
    assert.equal((await other).tokensGenerated, 12);
    // Its sequence was never taken: every sequence still serves.
    const results = await Promise.all(
      Array.from({ length: SEQUENCES }, (_, i) => batcher.run(job(`Tale ${i}`, { maxTokens: 4 }))),
    );
    assert.deepEqual(
      results.map((result) => result.tokensGenerated),
      Array<number>(SEQUENCES).fill(4),
    );
  });

  it("keeps the others going when one client's callback throws", async () => {
    const { batcher } = await makeBatcher();
    const throwing = batcher.run(
      job("Once upon a time", {
        maxTokens: 12,
        onText: () => {
          throw new Error("socket closed");
        },
      }),
    );
    const other = batcher.run(job("A big red ball", { maxTokens: 12 }));
    assert.equal((await throwing).tokensGenerated, 12);
    assert.equal((await other).tokensGenerated, 12);
  });

  it("refuses new requests once closed", async () => {
    const { batcher } = await makeBatcher();
    await batcher.close();
    await assert.rejects(batcher.run(job("Hello")), /closed/);
  });
});
