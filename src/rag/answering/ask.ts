/**
 * The RAG answering use case, with no HTTP in it: `ask` answers a question from an index, `converse`
 * the last question of a conversation (condensed into a standalone search first, conversation.ts).
 * Each searches, counts the query in the metrics, and composes the answer asked for (compose.ts);
 * each returns its run: the whole response (`result`) and the same run as a stream of events
 * (`events`: `results`, then the answer's pieces as `token`s, then `done` with the response). /rag/query,
 * /rag/chat, the OpenAI chat route and the CLI are adapters over these two.
 */
import { badRequest } from "../../core/errors.js";
import type { RagMetrics } from "../metrics.js";
import { reportedRetrieval, retrievalInput } from "../retrieval/options.js";
import type { Retrievers } from "../retrieval/retrievers.js";
import type { AnswerMode, QueryOutput, RagService } from "../service.js";
import { checkMetadataDepth } from "../service/settings.js";
import type { IndexKey, Metadata } from "../store/types.js";
import { composeAnswer, type AnsweringLog, type ComposeInput } from "./compose.js";
import { lastUserTurn, planSearch, type Turn } from "./conversation.js";
import { EventQueue } from "./event-queue.js";
import type { AnswerWriter } from "./generative.js";
import type { HistoryTurn } from "./prompt.js";
import type {
  AnswerFields,
  AskResponse,
  ConverseResponse,
  ResultsEvent,
  SearchAndAnswer,
} from "./schemas.js";

export interface AnsweringDeps {
  service: RagService;
  /** Writes generative answers; null without a model (answers are then extractive). */
  answerWriter: AnswerWriter | null;
  /** The embedder and reranker a query may use. */
  retrievers: Retrievers;
  /** Where queries are counted (the apps' /metrics); the CLI has none. */
  metrics?: Pick<RagMetrics, "queries" | "queryDuration">;
}

export type AnswerEvent<Response> =
  | { type: "results"; data: ResultsEvent }
  | { type: "token"; text: string }
  | { type: "done"; response: Response };

/** A running answer: its response, and its events as they happen (read `events` once). */
export interface AnswerRun<Response> {
  result: Promise<Response>;
  events: AsyncIterable<AnswerEvent<Response>>;
}

export interface RunOptions {
  /** Aborts the search and stops the model (the client went away). */
  signal?: AbortSignal;
  log?: AnsweringLog;
}

export interface AskInput extends SearchAndAnswer {
  key: IndexKey;
  query: string;
}

export interface ConverseInput extends SearchAndAnswer {
  key: IndexKey;
  /** The conversation, oldest first, ending with the user's question. */
  messages: Turn[];
}

/** The answer mode of a request: as asked, else generative when a model writes answers. */
export function answerModeOf(deps: Pick<AnsweringDeps, "answerWriter">, asked?: AnswerMode): AnswerMode {
  return asked ?? (deps.answerWriter ? "generative" : "extractive");
}

export function ask(deps: AnsweringDeps, input: AskInput, options: RunOptions = {}): AnswerRun<AskResponse> {
  return run(async (emit) => {
    checkMetadataDepth(input.filter, "filter");
    const found = await search(deps, input.key, input.query, input, options.signal);
    const searched = { query: input.query, ...found.fields };
    const answered = await answer(
      deps,
      emit,
      { results: found.results, count: found.results.length, elapsed_ms: found.elapsedMs },
      { ...found.compose, question: input.query },
      options,
    );
    return { ...searched, ...answered };
  });
}

export function converse(
  deps: AnsweringDeps,
  input: ConverseInput,
  options: RunOptions = {},
): AnswerRun<ConverseResponse> {
  return run(async (emit) => {
    const question = lastUserTurn(input.messages);
    if (typeof question !== "string") throw badRequest(question.problem, [{ path: "/messages" }]);
    checkMetadataDepth(input.filter, "filter");
    const port = deps.answerWriter?.port ?? null;
    const plan = await planSearch(input.messages, question, port, options.signal);
    const found = await search(deps, input.key, plan.searchQuery, input, options.signal);
    const planFields = {
      search_query: plan.searchQuery,
      query_rewritten: plan.queryRewritten,
      standalone_question: plan.standaloneQuestion,
      ...(plan.rewriteSkippedReason !== undefined && { rewrite_skipped_reason: plan.rewriteSkippedReason }),
      ...(plan.rewriteUsage && {
        rewrite_tokens: { prompt_tokens: plan.rewriteUsage.promptTokens, tokens: plan.rewriteUsage.tokens },
      }),
    };
    const answered = await answer(
      deps,
      emit,
      {
        results: found.results,
        count: found.results.length,
        elapsed_ms: found.elapsedMs,
        search_query: plan.searchQuery,
        query_rewritten: plan.queryRewritten,
        standalone_question: plan.standaloneQuestion,
      },
      {
        ...found.compose,
        // The model answers the standalone question when there is one, recalling the turns before it;
        // the extractive answer picks sentences matching everything searched.
        question: plan.standaloneQuestion ?? question,
        extractiveQuery: plan.searchQuery,
        history: input.messages.slice(0, -1).filter((turn): turn is HistoryTurn => turn.role !== "system"),
      },
      options,
    );
    return { query: question, ...planFields, ...found.fields, ...answered };
  });
}

/** The search of a question, counted in the metrics, with the fields every response reports. */
async function search(
  deps: AnsweringDeps,
  key: IndexKey,
  query: string,
  fields: SearchAndAnswer,
  signal?: AbortSignal,
) {
  const found: QueryOutput = await deps.service.query({
    key,
    query,
    topK: fields.top_k,
    minScore: fields.min_score,
    filter: fields.filter as Metadata | undefined,
    expand: fields.expand,
    ...retrievalInput(deps.retrievers, fields, signal),
  });
  const mode = answerModeOf(deps, fields.answer);
  deps.metrics?.queries.inc({ answer_mode: mode });
  deps.metrics?.queryDuration.observe(found.elapsedMs / 1000);
  return {
    results: found.results,
    elapsedMs: found.elapsedMs,
    fields: {
      results: found.results,
      count: found.results.length,
      ...reportedRetrieval(fields, found.retrieval),
      ...(found.filter && { filter_truncated: found.filter.truncated }),
      elapsed_ms: found.elapsedMs,
    },
    compose: {
      mode,
      results: found.results,
      analyze: (text: string) => found.loaded.engine.analyze(text),
    } satisfies Omit<ComposeInput, "question">,
  };
}

/**
 * Composes the answer, sending the `results` event once it is known how many sources the answer uses
 * (when the model's prompt is fitted, or the answer is composed without it), then the model's pieces.
 */
async function answer<Response>(
  deps: AnsweringDeps,
  emit: (event: AnswerEvent<Response>) => void,
  results: Omit<ResultsEvent, "sources_used">,
  input: ComposeInput,
  options: RunOptions,
): Promise<AnswerFields> {
  let announced = false;
  const announce = (sourcesUsed: number | undefined) => {
    if (announced) return;
    announced = true;
    emit({
      type: "results",
      data: { ...results, ...(sourcesUsed !== undefined && { sources_used: sourcesUsed }) },
    });
  };
  const answered = await composeAnswer(deps.answerWriter, input, {
    signal: options.signal,
    log: options.log,
    onPrompt: (prompt) => announce(prompt.sourcesUsed),
    onText: (piece) => emit({ type: "token", text: piece }),
  });
  announce(answered.sources_used);
  return answered;
}

/** Runs `work`, its events and its response both delivered: the events end with `done` or its error. */
function run<Response>(
  work: (emit: (event: AnswerEvent<Response>) => void) => Promise<Response>,
): AnswerRun<Response> {
  const events = new EventQueue<AnswerEvent<Response>>();
  const result = work((event) => events.push(event)).then(
    (response) => {
      events.push({ type: "done", response });
      events.end();
      return response;
    },
    (error: unknown) => {
      events.fail(error);
      throw error;
    },
  );
  // A caller that reads only the events learns of a failure there; the promise is then not unhandled.
  result.catch(() => undefined);
  return { result, events };
}
