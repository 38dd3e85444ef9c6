/**
 * The crafted reasoning model shared by the reasoning tests: the test model's tokenizer with weights
 * (scripts/lib/synthetic-gguf.ts, `chain`) that write one fixed text after any prompt — reasoning,
 * then `</think>`, then an answer — under a Qwen3-thinking-style chat template whose assistant turn
 * opens `<think>`, as Qwen3-Thinking's and DeepSeek-R1's do. (The opening is in the assistant header,
 * not only the generation prompt: node-llama-cpp's Jinja wrapper renders the header, not that prompt.)
 */
import { syntheticModel } from "../../scripts/lib/synthetic-gguf.js";
import { testModelPath } from "./env.js";

export const QWEN3_THINKING_TEMPLATE = [
  "{%- for message in messages -%}",
  "{%- if message.role == 'assistant' -%}",
  // Earlier reasoning is dropped from the history, as Qwen3's template does.
  "{{- '<|assistant|>\\n<think>\\n' + (message.content.split('</think>') | last | trim) + '<|end|>\\n' -}}",
  "{%- else -%}",
  "{{- '<|' + message.role + '|>\\n' + message.content + '<|end|>\\n' -}}",
  "{%- endif -%}",
  "{%- endfor -%}",
  "{%- if add_generation_prompt -%}",
  "{{- '<|assistant|>\\n<think>\\n' -}}",
  "{%- endif -%}",
].join("\n");

/** Words that are single tokens of the test model's vocabulary, none of them a token of `</think>`. */
export const REASONING = "Lily was happy";
export const ANSWER = "Once upon";
/** All the model ever writes (12 tokens, then end-of-sequence). */
export const OUTPUT = `${REASONING}</think> ${ANSWER}`;

export const REASONING_SHAPE = { embedding: 64, feedForward: 128, layers: 1, heads: 4, kvHeads: 4 };

/** Writes the crafted reasoning model into `dir` and returns its path. */
export function reasoningModel(dir: string): Promise<string> {
  return syntheticModel(testModelPath, REASONING_SHAPE, {
    chatTemplate: QWEN3_THINKING_TEMPLATE,
    chain: OUTPUT,
    tag: "qwen3-thinking",
    dir,
  });
}
