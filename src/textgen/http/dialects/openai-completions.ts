/** OpenAI legacy completions (`POST /v1/completions`), with llama.cpp's constraint fields. */
import { randomUUID } from "node:crypto";
import { Type, type Static } from "typebox";
import { badRequest } from "../../../core/errors.js";
import type { TypedApp } from "../../../core/http.js";
import type { GenerationEvent } from "../../engine/events.js";
import type { CompletionResult, TokenLogprob } from "../../engine/generator.js";
import type { ServedModel, TextgenService } from "../../engine/service.js";
import {
  validateRequest,
  type DecodedRequest,
  type DialectProfile,
  type ValidationLimits,
} from "../../engine/validation.js";
import { dialectPost, noEffect, noteUnenforced } from "../../../core/dialect-plugin.js";
import {
  clientGoneSignal,
  respond,
  unixSeconds,
  withPriority,
  type StreamEncoder,
  type WireFrame,
} from "./run.js";
import {
  ResponseFormat,
  decodeResponseFormat,
  decodeSampling,
  openAiChunk,
  openAiErrorBody,
  openAiFields,
  openAiStreamEnd,
  samplingFields,
  totalUsage,
  usageOf,
} from "./openai-shared.js";

export const CompletionRequestSchema = Type.Object({
  prompt: Type.Union(
    [
      Type.String(),
      Type.Array(Type.String()),
      Type.Array(Type.Integer()),
      Type.Array(Type.Array(Type.Integer())),
    ],
    { description: "a text, texts (a choice each), or token ids" },
  ),
  max_tokens: Type.Optional(
    Type.Integer({ description: "default 16; above MAX_NEW_TOKENS or the context: clamped" }),
  ),
  echo: Type.Optional(Type.Boolean({ description: "prepend the prompt to the text" })),
  logprobs: Type.Optional(Type.Integer({ description: "0…20 alternatives per token" })),
  best_of: Type.Optional(Type.Integer(noEffect("server-side best-of"))),
  suffix: Type.Optional(Type.String(noEffect("fill-in-the-middle"))),
  response_format: Type.Optional(ResponseFormat),
  ...samplingFields,
});

type CompletionBody = Static<typeof CompletionRequestSchema>;

const MAX_PROMPTS = 16;

export function decodeCompletion(body: CompletionBody, prompt: string): DecodedRequest {
  const sampling = decodeSampling(body);
  return {
    ...sampling,
    prompt,
    maxTokens: body.max_tokens,
    outputs: [...decodeResponseFormat(body.response_format), ...(sampling.outputs ?? [])],
    logprobs: body.logprobs,
  };
}

const profile: DialectProfile = {
  defaultMaxTokens: (max) => Math.min(16, max),
  defaultTemperature: 1,
  clampMaxTokens: true,
  fields: { ...openAiFields, logprobs: "/logprobs", output: "/response_format" },
  schemaPath: "/json_schema",
};

/** The prompts as texts (token ids detokenized by the model's tokenizer). */
async function promptTexts(body: CompletionBody, model: ServedModel): Promise<string[]> {
  const prompt = body.prompt;
  let texts: string[];
  if (typeof prompt === "string") texts = [prompt];
  else if (prompt.length > 0 && typeof prompt[0] === "number") {
    texts = [(await model.tokenizer()).detokenize(prompt as number[])];
  } else if (prompt.length > 0 && Array.isArray(prompt[0])) {
    const tokenizer = await model.tokenizer();
    texts = (prompt as number[][]).map((tokens) => tokenizer.detokenize(tokens));
  } else texts = prompt as string[];
  if (texts.length === 0 || texts.length > MAX_PROMPTS)
    throw badRequest(`prompt takes 1 to ${MAX_PROMPTS} prompts`, [{ path: "/prompt" }]);
  // No length of our own (OpenAI and llama.cpp's server have none): what bounds a prompt is the
  // body's size, MAX_TOKENIZE_CHARS (413) and the model's context (400), as for chat. A coding
  // agent's prefix alone is tens of thousands of tokens.
  texts.forEach((text, i) => {
    if (text === "") throw badRequest(`prompt ${i} is empty`, [{ path: "/prompt" }]);
  });
  return texts;
}

/** OpenAI's legacy completions logprobs object. */
function completionLogprobs(entries: TokenLogprob[], textOffset: number) {
  let offset = textOffset;
  const textOffsets: number[] = [];
  for (const entry of entries) {
    textOffsets.push(offset);
    offset += entry.text.length;
  }
  return {
    tokens: entries.map((entry) => entry.text),
    token_logprobs: entries.map((entry) => entry.logprob),
    top_logprobs: entries.map((entry) => Object.fromEntries(entry.top.map((top) => [top.text, top.logprob]))),
    text_offset: textOffsets,
  };
}

function completionBody(
  id: string,
  model: string,
  prompts: string[],
  results: CompletionResult[][],
  echo: boolean,
) {
  const choices = prompts.flatMap((prompt, p) =>
    results[p]!.map((result, k) => ({
      index: p * results[p]!.length + k,
      text: echo ? prompt + result.text : result.text,
      logprobs: result.logprobs ? completionLogprobs(result.logprobs, echo ? prompt.length : 0) : null,
      finish_reason: result.finishReason,
    })),
  );
  const usage = results.map(totalUsage).reduce((sum, one) => ({
    promptTokens: sum.promptTokens + one.promptTokens,
    completionTokens: sum.completionTokens + one.completionTokens,
    cachedTokens: sum.cachedTokens + one.cachedTokens,
  }));
  return { id, object: "text_completion", created: unixSeconds(), model, choices, usage: usageOf(usage) };
}

/** The legacy chunk stream: text pieces with their logprobs and offsets, a last chunk, [DONE]. */
class CompletionChunkEncoder implements StreamEncoder {
  private readonly offsets: number[];

  private readonly head: { id: string; object: string; model: string };

  constructor(
    id: string,
    model: string,
    private readonly prompt: string,
    private readonly choices: number,
    private readonly echo: boolean,
    private readonly includeUsage: boolean,
  ) {
    this.head = { id, object: "text_completion", model };
    this.offsets = Array.from({ length: choices }, () => (echo ? prompt.length : 0));
  }

  private chunk(
    choice: number,
    text: string,
    logprobs: TokenLogprob[] | undefined,
    finish: string | null,
  ): WireFrame {
    let converted = null;
    if (logprobs) {
      converted = completionLogprobs(logprobs, this.offsets[choice]!);
      for (const entry of logprobs) this.offsets[choice]! += entry.text.length;
    }
    return openAiChunk(this.head, [{ index: choice, text, logprobs: converted, finish_reason: finish }]);
  }

  start(): WireFrame[] {
    if (!this.echo) return [];
    return Array.from({ length: this.choices }, (_, choice) =>
      this.chunk(choice, this.prompt, undefined, null),
    );
  }

  event(event: GenerationEvent, choice: number): WireFrame[] {
    if (event.type === "text-delta") return [this.chunk(choice, event.delta, event.logprobs, null)];
    if (event.type === "finish") return [this.chunk(choice, "", event.logprobs, event.finishReason)];
    return [];
  }

  end(results: CompletionResult[]): WireFrame[] {
    return openAiStreamEnd(this.head, this.includeUsage, results);
  }

  error(error: Parameters<StreamEncoder["error"]>[0]): WireFrame[] {
    return [{ data: openAiErrorBody(error) }];
  }
}

export function registerCompletions(app: TypedApp, service: TextgenService, limits: ValidationLimits): void {
  dialectPost(
    app,
    "/completions",
    {
      tags: ["openai"],
      summary: "Continue a prompt (a list of prompts gives one choice each); JSON schema, GBNF, logprobs, n",
      body: CompletionRequestSchema,
    },
    async (body, request, reply) => {
      const id = `cmpl-${randomUUID()}`;
      const target = service.resolveModel(body.model, "generate", { keepAlive: body.keep_alive });
      const echo = body.echo === true;
      if (echo && body.logprobs !== undefined)
        throw badRequest("echo with logprobs is not supported: the prompt's own logprobs are not computed", [
          { path: "/echo" },
        ]);
      const prompts = await promptTexts(body, target);
      const validated = prompts.map((prompt) =>
        validateRequest(decodeCompletion(body, prompt), profile, limits),
      );
      noteUnenforced(reply, validated[0]!.unenforced);
      if (prompts.length > 1) {
        if (body.stream) throw badRequest("stream needs a single prompt", [{ path: "/prompt" }]);
        const signal = clientGoneSignal(request, reply);
        // Each prompt (and each of its n answers) is its own request, side by side like any others.
        const results = await Promise.all(
          validated.map((one) =>
            Promise.all(
              Array.from({ length: one.n }, () => target.run(withPriority(request, one.request), signal)),
            ),
          ),
        );
        return completionBody(id, target.name, prompts, results, echo);
      }
      const prompt = prompts[0]!;
      return respond({
        request,
        reply,
        model: target,
        validated: validated[0]!,
        stream: body.stream === true,
        encoder: () =>
          new CompletionChunkEncoder(
            id,
            target.name,
            prompt,
            validated[0]!.n,
            echo,
            body.stream_options?.include_usage === true,
          ),
        whole: (results) => completionBody(id, target.name, [prompt], [results], echo),
      });
    },
  );
}
