/**
 * What `ask` and `converse` take and give, as TypeBox schemas: the types of the answering layer and
 * the request and response schemas of every route over it (/rag/query, /rag/chat; the OpenAI route
 * and the CLI read the same responses), so a field is declared once.
 */
import { Type, type Static } from "typebox";
import { ExpandField, FusionField, RerankField, ResultScores, RetrievalField } from "../retrieval/schemas.js";

const Metadata = Type.Record(Type.String(), Type.Unknown(), { description: "any JSON object" });

export const AnswerModeField = Type.Union(
  [Type.Literal("none"), Type.Literal("extractive"), Type.Literal("generative")],
  {
    description:
      'default "generative" when a model writes answers (GENERATION_URL, or the model of this process), else "extractive"',
  },
);

export const ChatTurn = Type.Object(
  {
    role: Type.Union([Type.Literal("system"), Type.Literal("user"), Type.Literal("assistant")]),
    content: Type.String({ maxLength: 16_384 }),
  },
  { additionalProperties: false },
);
export type ChatTurn = Static<typeof ChatTurn>;

export const ChatTurns = Type.Array(ChatTurn, {
  minItems: 1,
  maxItems: 100,
  description: "the conversation, oldest first; it ends with the user's question",
});

/** How many results, how good, which documents, and how to answer: /rag/query and /rag/chat alike. */
export const searchAndAnswerFields = {
  top_k: Type.Integer({ minimum: 1, maximum: 100, default: 5 }),
  min_score: Type.Number({
    minimum: 0,
    maximum: 1,
    default: 0,
    description: "least first-stage score (lexical, dense cosine, or fused) a result may have",
  }),
  expand: Type.Optional(ExpandField),
  retrieval: Type.Optional(RetrievalField),
  fusion: Type.Optional(FusionField),
  rerank: Type.Optional(RerankField),
  filter: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "metadata equality" })),
  answer: Type.Optional(AnswerModeField),
};
export const SearchAndAnswer = Type.Object(searchAndAnswerFields);
export type SearchAndAnswer = Static<typeof SearchAndAnswer>;

export const QueryResultSchema = Type.Object({
  text: Type.String(),
  score: Type.Number({
    description:
      "what the results are ranked by: the lexical score (0 … 1), the dense cosine, the fused RRF score divided by its maximum (0 … 1), or the reranker's score",
  }),
  document_id: Type.String(),
  file: Type.String({ description: "source path, or the document id" }),
  chunk_id: Type.String(),
  title: Type.Union([Type.String(), Type.Null()]),
  metadata: Metadata,
  scores: Type.Optional(
    Type.Object(ResultScores, {
      description: "each retriever's own score, where computed (dense, hybrid or reranked queries)",
    }),
  ),
});

export const SourcesUsedField = Type.Integer({
  minimum: 0,
  description:
    "results the answer was written from: the first n, by rank, given to the model (the last one cut " +
    "to fit the context per request when it did not fit whole), or those an extractive answer quotes",
});

/** The answer, and how it was written: in every response of /rag/query and /rag/chat. */
export const answerFields = {
  answer: Type.Union([Type.String(), Type.Null()]),
  answer_mode: Type.Union([Type.Literal("none"), Type.Literal("extractive"), Type.Literal("generative")]),
  sources_used: Type.Optional(SourcesUsedField),
  citations: Type.Optional(Type.Array(Type.Integer(), { description: "result numbers the answer cites" })),
  generation: Type.Optional(
    Type.Object({
      model: Type.String(),
      tokens: Type.Integer({ description: "tokens of the answer" }),
      prompt_tokens: Type.Integer({ description: "tokens of the prompt, as the model counted them" }),
      context_tokens: Type.Integer({
        description: "tokens one request may hold (prompt and answer), which the prompt was fitted to",
      }),
      finish_reason: Type.Union([Type.Literal("stop"), Type.Literal("length")], {
        description: '"length": the answer was cut at its token limit',
      }),
      elapsed_ms: Type.Number(),
    }),
  ),
  generation_skipped_reason: Type.Optional(
    Type.String({ description: "why a generative answer was asked for but an extractive one is given" }),
  ),
};
export const AnswerFields = Type.Object(answerFields);
export type AnswerFields = Static<typeof AnswerFields>;

/** What a conversation searched: in /rag/chat responses and /rag/query responses given `messages`. */
export const searchPlanFields = {
  search_query: Type.String({ description: "what was searched" }),
  query_rewritten: Type.Boolean({
    description: "true when the model condensed the conversation into a standalone question",
  }),
  standalone_question: Type.Union([Type.String(), Type.Null()], {
    description: "the model's standalone question, or null",
  }),
  rewrite_skipped_reason: Type.Optional(
    Type.String({ description: "why the last user turn was searched as it stands" }),
  ),
  rewrite_tokens: Type.Optional(
    Type.Object(
      { prompt_tokens: Type.Integer(), tokens: Type.Integer() },
      { description: "tokens the model read and wrote to rewrite the conversation, when it did" },
    ),
  ),
};

const searchedFields = {
  query: Type.String(),
  results: Type.Array(QueryResultSchema),
  count: Type.Integer(),
  retrieval: Type.Optional(RetrievalField),
  filter_truncated: Type.Optional(
    Type.Boolean({
      description:
        "with a filter: true when the search stopped after testing its 10,000 best candidates (per retriever) with fewer than top_k passing; more matching chunks may lie further down",
    }),
  ),
  elapsed_ms: Type.Number(),
};

/** `ask`'s response: what /rag/query returns for a question. */
export const AskResponse = Type.Object({ ...searchedFields, ...answerFields });
export type AskResponse = Static<typeof AskResponse>;

/** `converse`'s response: what /rag/chat returns. */
export const ConverseResponse = Type.Object({ ...searchedFields, ...answerFields, ...searchPlanFields });
export type ConverseResponse = Static<typeof ConverseResponse>;

/** The `results` event of a streamed answer: the results, before the answer's pieces. */
export type ResultsEvent = Pick<AskResponse, "results" | "count" | "elapsed_ms" | "sources_used"> &
  Partial<Pick<ConverseResponse, "search_query" | "query_rewritten" | "standalone_question">>;
