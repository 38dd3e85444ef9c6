/** OpenAI legacy completions (`POST /v1/completions`), with llama.cpp's constraint fields. */
import { randomUUID } from "node:crypto";
import { Type, type Static } from "typebox";
import type { TypedApp } from "../../../core/http.js";
import { badRequest } from "../../../core/errors.js";
import { openEventStream, type EventStream } from "../../../core/sse.js";
import type { CompletionResult, GenerationRequest, TokenLogprob } from "../../engine/generator.js";
import { constraintFields } from "../schemas.js";
import type { TextgenService } from "../../engine/service.js";
import {
  clientGoneSignal,
  generateOnce,
  generateStream,
  resolveModel,
  strict,
  unixSeconds,
} from "./common.js";
import {
  ResponseFormat,
  openAiErrorBody,
  sampling,
  samplingOf,
  toConstraint,
  usageOf,
} from "./openai-shared.js";

function completionRequestSchema(maxNewTokens: number) {
  return Type.Object(
    {
      prompt: Type.Union([
        Type.String({ minLength: 1, maxLength: 32_768 }),
        Type.Array(Type.String({ minLength: 1, maxLength: 32_768 }), { minItems: 1, maxItems: 16 }),
      ]),
      max_tokens: Type.Integer({ minimum: 1, maximum: maxNewTokens, default: Math.min(16, maxNewTokens) }),
      echo: Type.Optional(Type.Boolean({ description: "prepend the prompt to the text" })),
      logprobs: Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: 20 }), Type.Null()])),
      ...constraintFields,
      response_format: Type.Optional(ResponseFormat),
      ...sampling,
    },
    strict,
  );
}

type CompletionBody = Static<ReturnType<typeof completionRequestSchema>>;

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

export function registerCompletions(app: TypedApp, service: TextgenService, maxNewTokens: number): void {
  app.post(
    "/completions",
    {
      schema: {
        tags: ["openai"],
        summary: "Continue a prompt (a list of prompts gives one choice each); JSON schema, GBNF, logprobs",
        body: completionRequestSchema(maxNewTokens),
      },
    },
    async (request, reply) => {
      const body: CompletionBody = request.body;
      const id = `cmpl-${randomUUID()}`;
      const target = resolveModel(service, body.model, body.keep_alive);
      const model = target.name;
      const base = () => ({ id, object: "text_completion", created: unixSeconds(), model });
      const prompts = typeof body.prompt === "string" ? [body.prompt] : body.prompt;
      const echo = body.echo === true;
      if (echo && body.logprobs != null)
        throw badRequest("echo with logprobs is not supported: the prompt's own logprobs are not computed", [
          { path: "/echo" },
        ]);
      const generation = (prompt: string): GenerationRequest => ({
        prompt,
        maxTokens: body.max_tokens,
        ...samplingOf(body),
        constraint: toConstraint(body.response_format, body.json_schema, body.grammar),
        logprobs: body.logprobs ?? undefined,
      });
      const choice = (index: number, prompt: string, result: CompletionResult) => ({
        index,
        text: echo ? prompt + result.text : result.text,
        logprobs: result.logprobs ? completionLogprobs(result.logprobs, echo ? prompt.length : 0) : null,
        finish_reason: result.finishReason,
      });
      if (prompts.length > 1) {
        if (body.stream) throw badRequest("stream needs a single prompt", [{ path: "/prompt" }]);
        const signal = clientGoneSignal(request, reply);
        // Each prompt is its own request: the scheduler runs them side by side like any others.
        const results = await Promise.all(prompts.map((prompt) => target.run(generation(prompt), signal)));
        const total = results.reduce(
          (sum, result) => ({
            promptTokens: sum.promptTokens + result.promptTokens,
            tokensGenerated: sum.tokensGenerated + result.tokensGenerated,
            cachedTokens: (sum.cachedTokens ?? 0) + (result.cachedTokens ?? 0),
          }),
          { promptTokens: 0, tokensGenerated: 0, cachedTokens: 0 },
        );
        return {
          ...base(),
          choices: results.map((result, index) => choice(index, prompts[index]!, result)),
          usage: usageOf(total),
        };
      }
      const prompt = prompts[0]!;
      if (!body.stream) {
        const result = await generateOnce(target, generation(prompt), request, reply);
        return { ...base(), choices: [choice(0, prompt, result)], usage: usageOf(result) };
      }
      let textOffset = echo ? prompt.length : 0;
      const streamLogprobs = (entries: TokenLogprob[] | undefined) => {
        if (!entries) return null;
        const converted = completionLogprobs(entries, textOffset);
        for (const entry of entries) textOffset += entry.text.length;
        return converted;
      };
      const chunk = (text: string, logprobs: TokenLogprob[] | undefined, finishReason: string | null) => ({
        ...base(),
        choices: [{ index: 0, text, logprobs: streamLogprobs(logprobs), finish_reason: finishReason }],
      });
      let events: EventStream | undefined;
      return generateStream(target, generation(prompt), request, reply, {
        open: () => {
          events = openEventStream(request, reply);
          if (echo) events.send(chunk(prompt, undefined, null));
        },
        event: (event) => {
          if (event.type === "text") events?.send(chunk(event.text, event.logprobs, null));
        },
        finish: (result, held) => {
          events?.send(chunk("", held, result.finishReason));
          if (body.stream_options?.include_usage === true)
            events?.send({ ...base(), choices: [], usage: usageOf(result) });
          events?.send("[DONE]");
        },
        fail: (error) => events?.send(openAiErrorBody(error)),
        close: () => events?.end(),
      });
    },
  );
}
