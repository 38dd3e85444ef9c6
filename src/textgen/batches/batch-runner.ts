/**
 * Runs batches, one at a time and oldest first, with BATCH_CONCURRENCY lines in flight. Each line
 * is an in-process request (`app.inject`) to its endpoint, made as the batch's owner at batch
 * priority (core/internal-call.ts): the same validation, generation and encoding as an interactive
 * request, and the scheduler admits it after every interactive request and preempts it for one.
 * A preempted or refused line (429, 503) is not a result: it is tried again.
 *
 * Durability: each line's result is recorded (one committed row) before it counts as done, and the
 * runner skips recorded lines, so a batch resumes where it stopped after a crash; a line cut short
 * by the crash runs again, and its one recorded result is what the output file shows.
 */
import { unixSeconds } from "../../core/time.js";
import type { FastifyInstance } from "fastify";
import { withInternalCall } from "../../core/internal-call.js";
import type { BatchBackend } from "../store/types.js";
import { ACTIVE, principalOf, type BatchState } from "./batch-object.js";
import type { BatchFiles } from "./files.js";
import { checkFile, fileLines, lineRequest, parseLine, type LineRequest } from "./jsonl.js";
import { newId } from "./files.js";

export interface BatchLimits {
  maxLines: number;
  maxLineBytes: number;
  concurrency: number;
}

interface Ref {
  tenant: string;
  id: string;
}

interface LineResult {
  ok: boolean;
  line: object;
}

/** How long a refused line waits before it is tried again, at most (Retry-After, else 1 s). */
const MAX_RETRY_WAIT_MS = 5_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());
const keyOf = (ref: Ref) => `${ref.tenant}\u0000${ref.id}`;

export class BatchRunner {
  private draining: Promise<void> | undefined;
  private again = false;
  private closing = false;
  private readonly cancelled = new Set<string>();

  constructor(
    private readonly app: Pick<FastifyInstance, "inject">,
    private readonly tables: BatchBackend,
    private readonly files: BatchFiles,
    private readonly limits: BatchLimits,
    private readonly log: { warn: (object: object, message: string) => void },
  ) {}

  /** Looks for batches with work left (at start, and after each new batch). */
  kick(): void {
    if (this.closing) return;
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = (async () => {
      do {
        this.again = false;
        for (const ref of await this.tables.activeBatches()) {
          if (this.closing) return;
          await this.runBatch(ref).catch((error: unknown) =>
            this.log.warn({ err: error, batch: ref.id }, "batch stopped; it resumes at the next start"),
          );
        }
      } while (this.again && !this.closing);
    })()
      .catch((error: unknown) => this.log.warn({ err: error }, "batches: the store could not be read"))
      .finally(() => (this.draining = undefined));
  }

  /** Stops after the lines in flight (their results are recorded if they finish; else run again). */
  cancel(ref: Ref): void {
    this.cancelled.add(keyOf(ref));
  }

  /** No new line starts; resolves once the runner stopped. */
  async close(): Promise<void> {
    this.closing = true;
    await this.draining;
  }

  private async load(ref: Ref): Promise<BatchState | undefined> {
    const stored = await this.tables.batch(ref.tenant, ref.id);
    return stored && (JSON.parse(stored.body) as BatchState);
  }

  private save(ref: Ref, state: BatchState): Promise<void> {
    // A cancellation the route made while this copy was in hand is kept (cancel() comes first).
    const { batch } = state;
    if (this.cancelled.has(keyOf(ref)) && (batch.status === "validating" || batch.status === "in_progress"))
      Object.assign(batch, { status: "cancelling", cancelling_at: batch.cancelling_at ?? unixSeconds() });
    const active = ACTIVE.has(state.batch.status);
    return this.tables.saveBatch(ref.tenant, ref.id, JSON.stringify(state), active, Date.now());
  }

  private async runBatch(ref: Ref): Promise<void> {
    const state = await this.load(ref);
    if (!state) return;
    if (state.batch.status === "cancelling") this.cancelled.add(keyOf(ref));
    if (state.batch.status === "validating" && !(await this.validate(ref, state))) return;
    if (state.batch.status === "in_progress")
      try {
        await this.runLines(ref, state);
      } catch (error) {
        // The input file was deleted while the batch ran: it cannot go on (anything else: it resumes).
        if ((error as { code?: unknown }).code !== "ENOENT") throw error;
        const message = "The input file was deleted before the batch finished";
        state.batch.errors = {
          object: "list",
          data: [{ code: "file_unreadable", message, line: null, param: null }],
        };
        Object.assign(state.batch, { status: "failed", failed_at: unixSeconds() });
        await this.save(ref, state);
        return;
      }
    if (this.closing) return;
    await this.finish(ref, state);
  }

  /** The validating step (jsonl.ts, checkFile); false when the batch failed or stopped. */
  private async validate(ref: Ref, state: BatchState): Promise<boolean> {
    const { batch } = state;
    const file = this.files.pathOf(ref.tenant, batch.input_file_id);
    const check = await checkFile(file, this.limits.maxLines, this.limits.maxLineBytes).catch(
      (error: unknown) => ({
        total: 0,
        errors: [{ code: "file_unreadable", message: String(error), line: null, param: "input_file_id" }],
      }),
    );
    if (check.errors.length > 0) {
      Object.assign(batch, { status: "failed", failed_at: unixSeconds() });
      batch.errors = { object: "list", data: check.errors };
      await this.save(ref, state);
      return false;
    }
    if (this.cancelled.has(keyOf(ref))) return true;
    Object.assign(batch, { status: "in_progress", in_progress_at: unixSeconds() });
    batch.request_counts.total = check.total;
    await this.save(ref, state);
    return true;
  }

  private stopping(ref: Ref, state: BatchState): boolean {
    return this.closing || this.cancelled.has(keyOf(ref)) || unixSeconds() >= state.batch.expires_at;
  }

  /** Every line not recorded yet, BATCH_CONCURRENCY at a time, until done or told to stop. */
  private async runLines(ref: Ref, state: BatchState): Promise<void> {
    const done = new Set(await this.tables.recordedLines(ref.tenant, ref.id));
    const file = this.files.pathOf(ref.tenant, state.batch.input_file_id);
    const inFlight = new Set<Promise<void>>();
    let failure: unknown;
    for await (const { number, text } of fileLines(file, this.limits.maxLineBytes)) {
      if ((text !== null && text.trim() === "") || done.has(number)) continue;
      while (inFlight.size >= this.limits.concurrency) await Promise.race(inFlight);
      if (failure !== undefined || this.stopping(ref, state)) break;
      const running: Promise<void> = this.runLine(ref, state, number, text)
        .catch((error: unknown) => (failure ??= error))
        .finally(() => inFlight.delete(running))
        .then(() => undefined);
      inFlight.add(running);
    }
    await Promise.all(inFlight);
    // A result that could not be recorded: the batch stays as it is, to resume later.
    if (failure !== undefined) throw failure;
  }

  private async runLine(ref: Ref, state: BatchState, number: number, text: string | null) {
    const parsed = text === null ? undefined : parseLine(text);
    const request: LineRequest = parsed
      ? lineRequest(parsed, state.batch.endpoint)
      : { custom_id: null, invalid: "the line is not a JSON object" };
    const result =
      "invalid" in request
        ? failedLine(request.custom_id, "invalid_request", request.invalid)
        : await this.call(state, request);
    if (result)
      await this.tables.recordLine(ref.tenant, ref.id, number, result.ok, JSON.stringify(result.line));
  }

  /** A line's request, run in-process until it gets an answer; undefined when stopping first. */
  private async call(
    state: BatchState,
    request: Exclude<LineRequest, { invalid: string }>,
  ): Promise<LineResult | undefined> {
    // Answers are whole: a stream has no place in an output file.
    const body = request.url === "/v1/embeddings" ? request.body : { ...request.body, stream: false };
    const internal = { principal: principalOf(state.owner), priority: "batch" as const };
    for (;;) {
      if (this.closing || unixSeconds() >= state.batch.expires_at) return undefined;
      const response = await withInternalCall(internal, (headers) =>
        this.app.inject({
          method: "POST",
          url: request.url,
          payload: JSON.stringify(body),
          headers: { ...headers, host: "localhost", "content-type": "application/json" },
        }),
      ).catch(() => undefined);
      if (!response) return undefined;
      if (response.statusCode === 429 || response.statusCode === 503) {
        const retryAfter = Number(response.headers["retry-after"]) * 1000;
        await sleep(Math.min(MAX_RETRY_WAIT_MS, Number.isFinite(retryAfter) ? retryAfter : 1000));
        continue;
      }
      let answer: unknown = response.body;
      try {
        answer = JSON.parse(response.body);
      } catch {
        // Kept as text.
      }
      const line = {
        id: newId("batch_req_"),
        custom_id: request.custom_id,
        response: {
          status_code: response.statusCode,
          request_id: response.headers["x-request-id"],
          body: answer,
        },
        error: null,
      };
      return { ok: response.statusCode < 400, line };
    }
  }

  /** Finalizing: expired lines recorded as such, the output and error files made, the status set. */
  private async finish(ref: Ref, state: BatchState): Promise<void> {
    const { batch } = state;
    if (batch.status === "failed") return;
    const cancelled = this.cancelled.has(keyOf(ref));
    const expired = !cancelled && unixSeconds() >= batch.expires_at;
    // A cancelled batch stays "cancelling" until it is "cancelled", as OpenAI's does.
    if (cancelled)
      Object.assign(batch, { status: "cancelling", cancelling_at: batch.cancelling_at ?? unixSeconds() });
    else Object.assign(batch, { status: "finalizing", finalizing_at: unixSeconds() });
    await this.save(ref, state);
    if (expired) await this.recordExpired(ref, state);
    for (const kind of ["output", "error"] as const) {
      const lines = await this.tables.lineResults(ref.tenant, ref.id, kind === "output");
      if (lines.length === 0) continue;
      const bytes = lines.reduce((sum, line) => sum + Buffer.byteLength(line) + 1, 0);
      const file = await this.files.recordResults(ref.tenant, ref.id, kind, bytes);
      batch[kind === "output" ? "output_file_id" : "error_file_id"] = file.id;
    }
    const at = unixSeconds();
    if (cancelled) Object.assign(batch, { status: "cancelled", cancelled_at: at });
    else if (expired) Object.assign(batch, { status: "expired", expired_at: at });
    else Object.assign(batch, { status: "completed", completed_at: at });
    await this.save(ref, state);
    this.cancelled.delete(keyOf(ref));
  }

  /** Lines never run before the batch expired: error-file lines, as OpenAI's `batch_expired`. */
  private async recordExpired(ref: Ref, state: BatchState): Promise<void> {
    const done = new Set(await this.tables.recordedLines(ref.tenant, ref.id));
    const file = this.files.pathOf(ref.tenant, state.batch.input_file_id);
    for await (const { number, text } of fileLines(file, this.limits.maxLineBytes)) {
      if ((text !== null && text.trim() === "") || done.has(number)) continue;
      const customId = text === null ? null : parseLine(text)?.custom_id;
      const line = failedLine(
        typeof customId === "string" ? customId : null,
        "batch_expired",
        "This request could not be executed before the completion window expired.",
      );
      await this.tables.recordLine(ref.tenant, ref.id, number, false, JSON.stringify(line.line));
    }
  }
}

function failedLine(customId: string | null, code: string, message: string): LineResult {
  return {
    ok: false,
    line: { id: newId("batch_req_"), custom_id: customId, response: null, error: { code, message } },
  };
}
