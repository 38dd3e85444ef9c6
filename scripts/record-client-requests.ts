/**
 * Records the request bodies real SDKs send for common calls (issue #34's corpus): each client gets a
 * `fetch` that forwards to the app on the test model and keeps what went out. Written to
 * test/textgen/conformance/recorded/<client>.json; test/textgen/conformance/recorded.test.ts replays
 * them. Run again after upgrading a client: `node --import tsx scripts/record-client-requests.ts`.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatAnthropic } from "@langchain/anthropic";
import { ChatOllama } from "@langchain/ollama";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, streamText, tool, type ModelMessage } from "ai";
import { Ollama } from "ollama";
import { createOllama } from "ollama-ai-provider-v2";
import OpenAI from "openai";
import { z } from "zod";
import { startTextgen } from "../test/helpers/servers.js";

interface Recorded {
  call: string;
  method: string;
  path: string;
  body: unknown;
  /** The JSON answer, where the client's next call may name its ids (previous_response_id, item_reference). */
  response?: unknown;
}

const server = await startTextgen();
const out = path.join(import.meta.dirname, "../test/textgen/conformance/recorded");
const Weather = z.object({ city: z.enum(["Oslo", "Paris"]) });

/** A fetch that records each JSON body under the current call's name, then forwards it. */
function recorder() {
  const calls: Recorded[] = [];
  let current = "";
  const fetchAndRecord = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const response = await fetch(input, init);
    if (typeof init?.body !== "string") return response;
    const entry: Recorded = {
      call: current,
      method: init.method ?? "POST",
      path: url.pathname,
      body: JSON.parse(init.body),
    };
    calls.push(entry);
    if (
      url.pathname.startsWith("/v1/responses") &&
      response.headers.get("content-type")?.includes("application/json")
    )
      entry.response = await response.clone().json();
    return response;
  }) as typeof fetch;
  const as = async (name: string, run: () => Promise<unknown>) => {
    current = name;
    await run();
  };
  return { calls, fetch: fetchAndRecord, as };
}

async function record(client: string, run: (r: ReturnType<typeof recorder>) => Promise<void>) {
  const r = recorder();
  await run(r);
  writeFileSync(path.join(out, `${client}.json`), `${JSON.stringify(r.calls, null, 2)}\n`);
  console.log(`${client}: ${r.calls.length} requests`);
}

try {
  await record("openai", async (r) => {
    const client = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey: "unused",
      maxRetries: 0,
      fetch: r.fetch,
    });
    const messages = [{ role: "user" as const, content: "Tell me a story." }];
    await r.as("chat", () => client.chat.completions.create({ model: "llama", messages, max_tokens: 8 }));
    await r.as("chat stream usage", async () => {
      const stream = await client.chat.completions.create({
        model: "llama",
        messages,
        max_tokens: 8,
        stream: true,
        stream_options: { include_usage: true },
      });
      for await (const chunk of stream) void chunk;
    });
    await r.as("chat tools forced", () =>
      client.chat.completions.create({
        model: "llama",
        messages,
        tools: [{ type: "function", function: { name: "weather", parameters: z.toJSONSchema(Weather) } }],
        tool_choice: "required",
      }),
    );
    await r.as("chat logprobs n", () =>
      client.chat.completions.create({
        model: "llama",
        messages,
        max_tokens: 4,
        logprobs: true,
        top_logprobs: 2,
        n: 2,
      }),
    );
    await r.as("embeddings", () =>
      client.embeddings.create({ model: "llama", input: "hello", dimensions: 32 }),
    );
    await r.as("responses", () =>
      client.responses.create({ model: "llama", input: "Hi", max_output_tokens: 8 }),
    );
    await r.as("chat reasoning_effort", () =>
      client.chat.completions.create({
        model: "llama",
        messages,
        max_completion_tokens: 8,
        reasoning_effort: "low",
      }),
    );
    await r.as("responses three turns", async () => {
      let previous: string | undefined;
      for (const input of ["Hi", "Tell me more.", "And then?"]) {
        const response = await client.responses.create({
          model: "llama",
          input,
          max_output_tokens: 8,
          previous_response_id: previous,
          reasoning: { effort: "low", summary: "auto" },
        });
        previous = response.id;
      }
    });
    await r.as("responses stream", async () => {
      const stream = await client.responses.create({
        model: "llama",
        input: "Hi",
        max_output_tokens: 8,
        stream: true,
      });
      for await (const event of stream) void event;
    });
  });

  await record("anthropic", async (r) => {
    const client = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0, fetch: r.fetch });
    const messages = [{ role: "user" as const, content: "Tell me a story." }];
    await r.as("messages", () => client.messages.create({ model: "llama", max_tokens: 8, messages }));
    await r.as("messages stream", () =>
      client.messages.stream({ model: "llama", max_tokens: 8, messages }).finalMessage(),
    );
    await r.as("count_tokens", () => client.messages.countTokens({ model: "llama", messages }));
    await r.as("messages thinking adaptive", () =>
      client.messages.create({ model: "llama", max_tokens: 8, messages, thinking: { type: "adaptive" } }),
    );
    await r.as("messages tools", () =>
      client.messages.create({
        model: "llama",
        max_tokens: 200,
        messages,
        tools: [{ name: "weather", input_schema: z.toJSONSchema(Weather) as never }],
        tool_choice: { type: "any" },
      }),
    );
  });

  await record("ai-sdk", async (r) => {
    const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", fetch: r.fetch });
    const anthropic = createAnthropic({ baseURL: `${server.url}/v1`, apiKey: "unused", fetch: r.fetch });
    const ollama = createOllama({ baseURL: `${server.url}/api`, fetch: r.fetch });
    const request = { prompt: "Tell me a story.", maxOutputTokens: 8, temperature: 0, maxRetries: 0 };
    await r.as("openai responses", () => generateText({ model: openai("llama"), ...request }));
    await r.as("openai responses stream", async () => {
      await streamText({ model: openai("llama"), ...request }).text;
    });
    await r.as("openai responses tools", () =>
      generateText({
        model: openai("llama"),
        ...request,
        maxOutputTokens: 200,
        tools: { weather: tool({ inputSchema: Weather }) },
        toolChoice: "required",
      }),
    );
    await r.as("anthropic", () => generateText({ model: anthropic("claude-sonnet-4-5"), ...request }));
    await r.as("ollama", () => generateText({ model: ollama("llama"), ...request }));
    await r.as("ollama think", () =>
      generateText({ model: ollama("llama"), ...request, providerOptions: { ollama: { think: true } } }),
    );
    await r.as("anthropic thinking adaptive", () =>
      generateText({
        model: anthropic("claude-sonnet-4-5"),
        ...request,
        providerOptions: { anthropic: { thinking: { type: "adaptive" } } },
      }),
    );
    const compatible = createOpenAICompatible({
      name: "lectern",
      baseURL: `${server.url}/v1`,
      fetch: r.fetch,
    });
    await r.as("openai-compatible chat", () =>
      generateText({ model: compatible.chatModel("llama"), ...request }),
    );
    await r.as("openai responses three turns", async () => {
      // The default provider keeps responses and sends earlier answers back as item references.
      const messages: ModelMessage[] = [];
      for (const prompt of ["Hi", "Tell me more.", "And then?"]) {
        messages.push({ role: "user", content: prompt });
        const result = await generateText({
          model: openai("llama"),
          ...request,
          prompt: undefined,
          messages,
        });
        messages.push(...result.response.messages);
      }
    });
  });

  await record("ollama", async (r) => {
    const client = new Ollama({ host: server.url, fetch: r.fetch });
    const messages = [{ role: "user", content: "Tell me a story." }];
    await r.as("chat", () => client.chat({ model: "llama", messages, options: { num_predict: 8 } }));
    await r.as("generate", () =>
      client.generate({ model: "llama", prompt: "Once", options: { num_predict: 8 } }),
    );
    await r.as("chat think", () =>
      client.chat({ model: "llama", messages, think: true, options: { num_predict: 8 } }),
    );
    await r.as("chat tools", () =>
      client.chat({
        model: "llama",
        messages,
        tools: [
          { type: "function", function: { name: "weather", parameters: z.toJSONSchema(Weather) as never } },
        ],
        options: { num_predict: 8 },
      }),
    );
  });

  await record("langchain", async (r) => {
    const chat = new ChatOpenAI({
      model: "llama",
      apiKey: "unused",
      maxTokens: 8,
      maxRetries: 0,
      configuration: { baseURL: `${server.url}/v1`, fetch: r.fetch },
    });
    await r.as("ChatOpenAI invoke", () => chat.invoke("Tell me a story."));
    const responses = new ChatOpenAI({
      model: "llama",
      apiKey: "unused",
      maxTokens: 8,
      maxRetries: 0,
      useResponsesApi: true,
      configuration: { baseURL: `${server.url}/v1`, fetch: r.fetch },
    });
    await r.as("ChatOpenAI responses", () => responses.invoke("Tell me a story."));
    const anthropic = new ChatAnthropic({
      model: "claude-sonnet-4-5",
      anthropicApiUrl: server.url,
      apiKey: "unused",
      maxRetries: 0,
      clientOptions: { fetch: r.fetch },
    });
    await r.as("ChatAnthropic invoke", () => anthropic.invoke("Tell me a story."));
    const ollama = new ChatOllama({
      model: "llama",
      baseUrl: server.url,
      numPredict: 8,
      think: true,
      fetch: r.fetch,
    });
    await r.as("ChatOllama think", () => ollama.invoke("Tell me a story."));
  });
} finally {
  await server.close();
}
