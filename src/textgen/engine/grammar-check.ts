/**
 * Runs the grammar budget check (grammar-budget.ts) off the event loop: it simulates llama.cpp's
 * parse stacks and may take a few hundred milliseconds on a grammar near the budget, which must not
 * hold up /health or other requests. One worker thread, started on first use, with a heap limit and
 * a time limit (a check past it is refused and the worker replaced); the last answers are remembered,
 * since clients send the same tool and response schemas again and again.
 */
import { Worker } from "node:worker_threads";
import { busy } from "../../core/errors.js";
import { GrammarBudgetError, type CompiledGrammar, type GrammarBudget } from "./grammar-budget.js";
import type { CheckAnswer, CheckRequest } from "./grammar-check-worker.js";

/** Longer than any check within the analysis budget takes on a loaded machine. */
const CHECK_TIMEOUT_MS = 10_000;
/** Checks waiting for the worker before new ones are told to retry. */
const MAX_PENDING = 64;
const CACHE_SIZE = 128;
const WORKER_HEAP_MB = 256;

/** Parsed grammars kept with their answers up to this many elements (larger ones are asked again). */
const CACHED_GRAMMAR_ELEMENTS = 50_000;

export interface CheckResult {
  stacks: number;
  /** The parsed grammar, for following its stacks while sampling (grammar-guard.ts). */
  compiled: CompiledGrammar;
}

/** `transient`: the worker failed, not the grammar; not remembered. */
type Outcome = { stacks: number; compiled?: CompiledGrammar } | { error: Error; transient?: boolean };

export class GrammarChecker {
  private worker?: Worker;
  private nextId = 0;
  private readonly pending = new Map<number, (outcome: Outcome) => void>();
  private readonly cache = new Map<string, Outcome>();
  /** Checks on the worker now, by grammar: the same grammar sent by several clients at once is checked once. */
  private readonly inFlight = new Map<string, Promise<Outcome>>();

  /**
   * Resolves with the stacks seen and the parsed grammar; throws GrammarBudgetError, or Error for a
   * syntax problem.
   */
  async check(grammar: string, budget: GrammarBudget): Promise<CheckResult> {
    const key = `${JSON.stringify(budget)}\n${grammar}`;
    let outcome = this.cache.get(key);
    if (outcome === undefined || ("stacks" in outcome && outcome.compiled === undefined)) {
      let asking = this.inFlight.get(key);
      if (!asking) {
        asking = this.ask(grammar, budget).finally(() => this.inFlight.delete(key));
        this.inFlight.set(key, asking);
      }
      outcome = await asking;
      if (this.cache.size >= CACHE_SIZE) this.cache.delete(this.cache.keys().next().value!);
    } else this.cache.delete(key);
    if ("error" in outcome) {
      if (!outcome.transient) this.cache.set(key, outcome);
      throw outcome.error;
    }
    // Large parsed grammars are not kept: the cache must stay small whatever clients send.
    const small = (outcome.compiled?.elements.length ?? 0) <= CACHED_GRAMMAR_ELEMENTS;
    this.cache.set(key, small ? outcome : { stacks: outcome.stacks });
    return { stacks: outcome.stacks, compiled: outcome.compiled! };
  }

  /** Stops the worker (the app is closing). */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private ask(grammar: string, budget: GrammarBudget): Promise<Outcome> {
    if (this.pending.size >= MAX_PENDING)
      throw busy("Too many grammars are being checked; retry shortly.", 1);
    const worker = this.ensureWorker();
    const id = this.nextId++;
    return new Promise<Outcome>((resolve) => {
      const timer = setTimeout(() => {
        // A check past its time: refused, and the worker (still busy with it) replaced.
        this.failAll(
          new GrammarBudgetError(
            `checking the grammar took over ${CHECK_TIMEOUT_MS} ms; simplify it`,
            "analysis",
          ),
        );
      }, CHECK_TIMEOUT_MS);
      timer.unref();
      this.pending.set(id, (outcome) => {
        clearTimeout(timer);
        resolve(outcome);
      });
      worker.postMessage({ id, grammar, budget } satisfies CheckRequest);
    });
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = startWorker();
    worker.unref();
    worker.on("message", (answer: CheckAnswer) => {
      const settle = this.pending.get(answer.id);
      this.pending.delete(answer.id);
      if (!settle) return;
      if ("stacks" in answer) settle({ stacks: answer.stacks, compiled: answer.compiled });
      else
        settle({
          error: answer.limit ? new GrammarBudgetError(answer.error, answer.limit) : new Error(answer.error),
        });
    });
    // Out of memory (its heap limit) or crashed: the checks it held are refused, the next one starts
    // a new worker.
    worker.on("error", () =>
      this.failAll(new GrammarBudgetError("checking the grammar took more memory than allowed", "analysis")),
    );
    worker.on("exit", () => {
      if (this.worker === worker) this.worker = undefined;
    });
    this.worker = worker;
    return worker;
  }

  private failAll(error: Error): void {
    const worker = this.worker;
    this.worker = undefined;
    void worker?.terminate();
    const settles = [...this.pending.values()];
    this.pending.clear();
    // Not remembered: a grammar refused for the worker's trouble may pass another time.
    for (const settle of settles) settle({ error, transient: true });
  }
}

/**
 * Compiled, the worker is `grammar-check-worker.js`; under tsx (tests) the `.ts` file, and since
 * Node 20's workers do not run the parent's `--import` hooks, a bootstrap registers tsx first (as
 * src/rag/search/indexer/merge.ts does).
 */
function startWorker(): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: WORKER_HEAP_MB };
  const underTsx = import.meta.url.endsWith(".ts");
  const workerUrl = new URL("./grammar-check-worker." + (underTsx ? "ts" : "js"), import.meta.url);
  if (!underTsx) return new Worker(workerUrl, { resourceLimits });
  const tsxApi = import.meta.resolve("tsx/esm/api");
  const bootstrap =
    `import(${JSON.stringify(tsxApi)}).then(({ register }) => { register(); ` +
    `return import(${JSON.stringify(workerUrl.href)}); });`;
  return new Worker(bootstrap, { eval: true, resourceLimits });
}
