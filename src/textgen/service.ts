/**
 * What every generation route calls: validation against the model's context, admission through the
 * scheduler, live token metrics, and an `onStart` hook so streaming routes open their stream only once
 * the request holds a sequence (until then it can still get a plain JSON 429/504).
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { CompletionResult, GenerationRequest, Generator } from "./generator.js";
import type { Scheduler } from "./scheduler.js";

export interface RunHooks {
  /** Called when generation is about to start (a sequence is held). */
  onStart?: () => void;
}

export class TextgenService {
  private readonly tokens: Counter;
  private readonly generations: Counter<"finish_reason">;
  private readonly duration: Histogram;
  private readonly tokensPerSecond: Gauge;

  constructor(
    readonly generator: Generator,
    readonly scheduler: Scheduler,
    registry: Registry,
  ) {
    this.tokens = new Counter({
      name: "lectern_generated_tokens_total",
      help: "Tokens generated, counted as they are produced",
      registers: [registry],
    });
    this.generations = new Counter({
      name: "lectern_generations_total",
      help: "Generations finished, by finish reason",
      labelNames: ["finish_reason"],
      registers: [registry],
    });
    this.duration = new Histogram({
      name: "lectern_generation_duration_seconds",
      help: "Time from holding a sequence to the last token",
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers: [registry],
    });
    this.tokensPerSecond = new Gauge({
      name: "lectern_tokens_per_second",
      help: "Decode speed of the last finished generation",
      registers: [registry],
    });
    new Gauge({
      name: "lectern_queue_depth",
      help: "Requests waiting for a sequence",
      registers: [registry],
      collect() {
        this.set(scheduler.stats().queued);
      },
    });
    new Gauge({
      name: "lectern_running_generations",
      help: "Generations holding a sequence",
      registers: [registry],
      collect() {
        this.set(scheduler.stats().running);
      },
    });
  }

  async run(
    request: GenerationRequest,
    clientSignal: AbortSignal,
    hooks: RunHooks = {},
  ): Promise<CompletionResult> {
    await this.generator.validate(request);
    return this.scheduler.run(clientSignal, async (signal) => {
      hooks.onStart?.();
      const started = performance.now();
      const result = await this.generator.generate({
        ...request,
        signal,
        onTokens: (count) => {
          this.tokens.inc(count);
          request.onTokens?.(count);
        },
      });
      const seconds = (performance.now() - started) / 1000;
      this.duration.observe(seconds);
      if (result.tokensGenerated > 0 && seconds > 0)
        this.tokensPerSecond.set(result.tokensGenerated / seconds);
      this.generations.inc({ finish_reason: result.finishReason });
      return result;
    });
  }
}
