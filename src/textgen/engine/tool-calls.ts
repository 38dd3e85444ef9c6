/**
 * Tool calling on a local model, independent of HTTP shapes.
 *
 * - The tools are shown to the model in its chat wrapper's own function syntax (node-llama-cpp's
 *   `availableFunctions`), and earlier calls and results in the history are rendered the same way.
 *   Their schemas only describe there: they are never compiled or refused (json-schema.ts
 *   `describeSchema`).
 * - `required` or a named tool: the answer is generated under a JSON-schema grammar for
 *   `{"name": <tool>, "arguments": <its parameters>}`, so it parses and matches, whatever the model
 *   (the parameters as validation.ts translated them: what the grammar can enforce).
 * - `auto`: the model writes freely; an answer that is a call, in the wrapper's syntax
 *   (`||call: name({...})`, `<tool_call>{...}</tool_call>`…) or as that JSON object, becomes a call.
 */
import { randomUUID } from "node:crypto";
import {
  LlamaText,
  type ChatHistoryItem,
  type ChatModelFunctions,
  type ChatModelResponse,
  type ChatWrapper,
  type GbnfJsonSchema,
} from "node-llama-cpp";
import { badRequest } from "../../core/errors.js";
import type { ChatMessage, GrammarSchema, ToolCall, ToolChoice, ToolDefinition } from "./generator.js";
import { describeSchema } from "./json-schema.js";

export function newToolCallId(): string {
  return `call_${randomUUID().replace(/-/g, "").slice(0, 24)}`;
}

/** The functions as node-llama-cpp's chat wrappers describe them to the model. */
export function availableFunctions(tools: readonly ToolDefinition[]): ChatModelFunctions {
  const functions: Record<string, { description?: string; params: GbnfJsonSchema }> = {};
  for (const tool of tools)
    functions[tool.name] = {
      description: tool.description,
      params: describeSchema(tool.parameters ?? { type: "object" }),
    };
  return functions as ChatModelFunctions;
}

/** The tools a call may name under `choice`, or an error naming an unknown tool. */
export function toolsForChoice(tools: readonly ToolDefinition[], choice: ToolChoice): ToolDefinition[] {
  if (typeof choice === "string") return [...tools];
  const tool = tools.find((candidate) => candidate.name === choice.name);
  if (!tool)
    throw badRequest(
      `tool_choice names the function "${choice.name}", which is not in tools (${tools.map((t) => t.name).join(", ") || "none"})`,
      [{ path: "/tool_choice/function/name" }],
    );
  return [tool];
}

/**
 * JSON schema of one call to any of `tools`: `{"name": …, "arguments": {…}}`, each tool's arguments as
 * validation translated them (any object where it did not).
 */
export function toolCallSchema(tools: readonly ToolDefinition[]): GrammarSchema {
  const patterns = new Map<string, string>();
  const options = tools.map((tool) => {
    for (const [placeholder, grammar] of tool.grammar?.patterns ?? []) patterns.set(placeholder, grammar);
    return {
      type: "object" as const,
      properties: {
        name: { const: tool.name },
        arguments: tool.grammar?.schema ?? { type: "object", additionalProperties: true },
      },
    };
  });
  return {
    schema: (options.length === 1 ? options[0]! : { oneOf: options }) as GbnfJsonSchema,
    patterns,
  };
}

/** A streamed piece of a tool call, as OpenAI's chunks carry it (`id` and `name` in the first). */
export interface ToolCallDelta {
  index: number;
  id?: string;
  name?: string;
  arguments: string;
}

const forcedCallHead = /^\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*/;

/**
 * Follows the text a tool-call grammar writes (`{"name": "…", "arguments": {…}}`) as it is generated:
 * announces the call once its name is complete, then passes on the arguments' text piece by piece,
 * up to the end of the arguments object. `call()` gives the finished call, arguments as written.
 */
export class ForcedCallStream {
  readonly id = newToolCallId();
  private text = "";
  private name: string | undefined;
  private argumentsStart = -1;
  private argumentsEnd = -1;
  private depth = 0;
  private inString = false;
  private escaped = false;

  constructor(private readonly onDelta?: (delta: ToolCallDelta) => void) {}

  /** Whether the call's name has been written (and announced). */
  get started(): boolean {
    return this.name !== undefined;
  }

  push(piece: string): void {
    const scanFrom = this.text.length;
    this.text += piece;
    if (this.name === undefined) {
      const head = forcedCallHead.exec(this.text);
      if (!head) return;
      this.name = JSON.parse(`"${head[1]}"`) as string;
      this.argumentsStart = head[0].length;
      this.onDelta?.({ index: 0, id: this.id, name: this.name, arguments: "" });
    }
    if (this.argumentsEnd !== -1) return;
    let from = Math.max(scanFrom, this.argumentsStart);
    for (let i = from; i < this.text.length; i++) {
      const char = this.text[i]!;
      // Whitespace before the arguments' first character is not theirs.
      if (i === this.argumentsStart && /\s/.test(char)) {
        this.argumentsStart = from = i + 1;
        continue;
      }
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (char === "\\") this.escaped = true;
        else if (char === '"') this.inString = false;
      } else if (char === '"') this.inString = true;
      else if (char === "{" || char === "[") this.depth++;
      else if (char === "}" || char === "]") {
        this.depth--;
        if (this.depth === 0) {
          this.argumentsEnd = i + 1;
          break;
        }
      }
    }
    const end = this.argumentsEnd === -1 ? this.text.length : this.argumentsEnd;
    if (end > from) this.onDelta?.({ index: 0, arguments: this.text.slice(from, end) });
  }

  /**
   * The call as far as it was written, for an answer cut by max_tokens: a forced call stays a call,
   * with the arguments generated so far (`fallbackName` when even the name was cut).
   */
  partialCall(fallbackName?: string): ToolCall | undefined {
    const name = this.name ?? fallbackName;
    if (name === undefined) return undefined;
    const start = this.name === undefined ? this.text.length : this.argumentsStart;
    const end = this.argumentsEnd === -1 ? this.text.length : this.argumentsEnd;
    return { id: this.id, name, arguments: this.text.slice(start, end) };
  }

  /** The finished call, or undefined when the text was cut before the arguments closed. */
  call(): ToolCall | undefined {
    if (this.name === undefined || this.argumentsEnd === -1) return undefined;
    return {
      id: this.id,
      name: this.name,
      arguments: this.text.slice(this.argumentsStart, this.argumentsEnd),
    };
  }
}

/** OpenAI-style messages as node-llama-cpp chat history; tool results attach to their calls. */
export function toChatHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  const callsById = new Map<string, { result: unknown }>();
  for (const message of messages) {
    if (message.role === "system") history.push({ type: "system", text: message.content });
    else if (message.role === "user") history.push({ type: "user", text: message.content });
    else if (message.role === "assistant") {
      const response: ChatModelResponse["response"] = [];
      if (message.reasoning)
        response.push({ type: "segment", segmentType: "thought", text: message.reasoning, ended: true });
      for (const call of message.toolCalls ?? []) {
        const item = {
          type: "functionCall" as const,
          name: call.name,
          params: parseJson(call.arguments),
          result: "",
        };
        callsById.set(call.id, item);
        response.push(item);
      }
      if (message.content !== "") response.push(message.content);
      history.push({ type: "model", response });
    } else {
      const call = message.toolCallId === undefined ? undefined : callsById.get(message.toolCallId);
      if (call) call.result = parseJson(message.content);
      // A result whose call is not in the history still reaches the model, as text.
      else history.push({ type: "user", text: `Tool result: ${message.content}` });
    }
  }
  return history;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function plain(text: string | LlamaText | readonly unknown[] | undefined): string {
  if (text === undefined) return "";
  if (typeof text === "string") return text;
  return LlamaText(text as never).toString();
}

/** Text that, once the model writes it in `auto` mode, means it invented a result: stop there. */
export function resultPrefix(wrapper: ChatWrapper): string | undefined {
  const prefix = plain(wrapper.settings.functions.result.prefix as string | LlamaText).trim();
  return prefix === "" ? undefined : prefix;
}

/**
 * Calls in a freely written answer: the wrapper's call syntax, or JSON objects with `name` and
 * `arguments` naming a known tool (alone, in a list, or in `<tool_call>` tags). Returns the calls and
 * the text outside them, or undefined when the answer holds no call.
 */
/**
 * Streams an `auto` answer's text until something that may begin a call appears (the wrapper's call
 * prefix, `<tool_call>`, `{`, a code fence); from there on the text is held, to be read for calls once
 * the answer is complete. So a text answer streams as usual.
 */
export class AutoCallHoldback {
  /** Text passed on so far. */
  released = "";
  private pending = "";
  private holding = false;
  private readonly markers: string[];

  constructor(
    wrapper: ChatWrapper,
    private readonly onText?: (piece: string) => void,
  ) {
    const settings = wrapper.settings.functions.call;
    this.markers = [plain(settings.prefix), ...(settings.prefixAlternateMatches ?? []).map((p) => plain(p))]
      .map((prefix) => prefix.trim())
      .filter((prefix) => prefix !== "")
      .concat(["<tool_call>", "{", "```"]);
  }

  push(piece: string): void {
    if (this.holding) return;
    this.pending += piece;
    let cut = this.pending.length;
    for (const marker of this.markers) {
      const at = this.pending.indexOf(marker);
      if (at !== -1) {
        cut = Math.min(cut, at);
        this.holding = true;
      }
      // A marker may be starting at the end of the text: wait for the next piece.
      for (let length = Math.min(marker.length - 1, this.pending.length); length > 0; length--)
        if (this.pending.endsWith(marker.slice(0, length))) cut = Math.min(cut, this.pending.length - length);
    }
    const release = this.pending.slice(0, cut);
    this.pending = this.pending.slice(cut);
    if (release !== "") {
      this.released += release;
      this.onText?.(release);
    }
  }
}

export function parseAutoCalls(
  text: string,
  wrapper: ChatWrapper,
  tools: readonly ToolDefinition[],
): { calls: ToolCall[]; content: string } | undefined {
  const known = new Set(tools.map((tool) => tool.name));
  const settings = wrapper.settings.functions.call;
  const prefixes = [plain(settings.prefix), ...(settings.prefixAlternateMatches ?? []).map((p) => plain(p))]
    .map((prefix) => prefix.trim())
    .filter((prefix) => prefix !== "");
  const paramsPrefix = plain(settings.paramsPrefix).trim();
  // What closes a call: the wrapper's suffix (whitespace aside), or a common closing tag.
  const suffixText = plain(settings.suffix).trim();
  const suffixPattern = suffixText === "" ? "" : suffixText.split(/\s+/).map(escapeRegExp).join("\\s*") + "|";
  const suffix = new RegExp(`^\\s*(?:${suffixPattern}\\)|</tool_call>|\`\`\`)?`);
  const calls: ToolCall[] = [];
  let content = "";
  let rest = text;
  for (;;) {
    const found = nextCallStart(rest, prefixes);
    if (!found) break;
    const afterPrefix = rest.slice(found.index + found.prefix.length);
    let call: { name: string; args: unknown; end: number } | undefined;
    if (found.prefix === "{" || found.prefix === "[") call = jsonCall(rest.slice(found.index));
    else call = wrapperCall(afterPrefix, paramsPrefix);
    if (!call || !known.has(call.name)) {
      content += rest.slice(0, found.index + found.prefix.length);
      rest = afterPrefix;
      continue;
    }
    content += rest.slice(0, found.index);
    calls.push({ id: newToolCallId(), name: call.name, arguments: JSON.stringify(call.args ?? {}) });
    const consumed =
      found.prefix === "{" || found.prefix === "["
        ? found.index + call.end
        : found.index + found.prefix.length + call.end;
    rest = rest.slice(consumed).replace(suffix, "");
  }
  if (calls.length === 0) return undefined;
  content = (content + rest)
    .replace(/<tool_call>\s*$/g, "")
    .replace(/```(?:json)?\s*$/, "")
    .trim();
  return { calls, content };
}

function nextCallStart(text: string, prefixes: string[]): { index: number; prefix: string } | undefined {
  let best: { index: number; prefix: string } | undefined;
  for (const prefix of [...prefixes, "{"]) {
    const index = text.indexOf(prefix);
    if (index !== -1 && (!best || index < best.index)) best = { index, prefix };
  }
  return best;
}

/** `name<paramsPrefix>{json}`: the name, the arguments, and where the JSON ended. */
function wrapperCall(
  text: string,
  paramsPrefix: string,
): { name: string; args: unknown; end: number } | undefined {
  const at = paramsPrefix === "" ? text.search(/[{\s]/) : text.indexOf(paramsPrefix);
  if (at <= 0) return undefined;
  const name = text.slice(0, at).trim().replace(/^"|"$/g, "");
  const jsonStart = at + paramsPrefix.length;
  const json = readJsonValue(text, jsonStart);
  if (!json) return undefined;
  return { name, args: json.value, end: json.end };
}

/** `{"name": …, "arguments": …}` at the start of `text`. */
function jsonCall(text: string): { name: string; args: unknown; end: number } | undefined {
  const json = readJsonValue(text, 0);
  if (!json || typeof json.value !== "object" || json.value === null) return undefined;
  const value = json.value as { name?: unknown; arguments?: unknown; parameters?: unknown };
  if (typeof value.name !== "string") return undefined;
  const args = value.arguments ?? value.parameters ?? {};
  return { name: value.name, args: typeof args === "string" ? parseJson(args) : args, end: json.end };
}

/** The JSON value starting at `from` (after whitespace), parsed, and the index after it. */
function readJsonValue(text: string, from: number): { value: unknown; end: number } | undefined {
  let start = from;
  while (start < text.length && /\s/.test(text[start]!)) start++;
  const open = text[start];
  if (open !== "{" && open !== "[") return undefined;
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const char = text[i]!;
    if (inString) {
      if (char === "\\") i++;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === "{" || char === "[") depth++;
    else if (char === "}" || char === "]") {
      depth--;
      if (depth === 0) {
        try {
          return { value: JSON.parse(text.slice(start, i + 1)), end: i + 1 };
        } catch {
          return undefined;
        }
      }
    }
  }
  return undefined;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
