// @ts-check
// Generate: a prompt to /predict (streamed), or to /v1/chat/completions when tools are given.
import { ApiError, isEventStream, postJson, readEvents } from "./api.js";
import { $, formatCount, formatCountOf, formatMs, optionalNumber, setStatus, toggleRunning } from "./dom.js";
import { boundNewTokens, fillModelPicker, loadModels, newTokensProblem } from "./models.js";
import { config, on, running, shared } from "./state.js";

const generateForm = $("#generate-form");
const generateButton = $("#generate-button");
const generateStop = $("#generate-stop");
const generateStatus = $("#generate-status");
const output = $("#generate-output");
const promptEcho = $(".prompt-echo", output);
const generated = $(".generated", output);
const toolCallView = $("#tool-calls");
const toolCallList = $("#tool-calls ol");
const modelSelect = /** @type {HTMLSelectElement} */ ($("#generate-model"));
const maxLength = /** @type {HTMLInputElement} */ ($("#max-length"));
const maxLengthHint = $("#max-length-hint");
const stats = Object.fromEntries(
  [...document.querySelectorAll("#generate-stats [data-stat]")].map((node) => [
    /** @type {HTMLElement} */ (node).dataset.stat,
    node,
  ]),
);
let generation = null;

function stopSequences(raw) {
  const parts = raw
    .split("|")
    .map((part) => part.replace(/\\n/g, "\n").replace(/\\t/g, "\t"))
    .filter((part) => part.length > 0);
  if (parts.length > 4) throw new Error("Give at most 4 stop sequences");
  if (parts.length === 0) return undefined;
  return parts.length === 1 ? parts[0] : parts;
}

/** @param {{ tokens: number, finish?: string, elapsedMs: number, model?: string }} figures */
function showGenerationStats({ tokens, finish, elapsedMs, model }) {
  stats.tokens.textContent = formatCount(tokens);
  stats.finish.textContent = finish ?? "–";
  stats.elapsed.textContent = formatMs(elapsedMs);
  stats.speed.textContent =
    elapsedMs > 0 && tokens > 0 ? `${(tokens / (elapsedMs / 1000)).toFixed(1)} tok/s` : "–";
  stats.model.textContent = model || shared.modelName || "–";
}

function setGenerating(busy) {
  toggleRunning(generateButton, generateStop, busy);
  output.setAttribute("aria-busy", String(busy));
}

/** Parses a JSON text box, or throws an error saying which box and why. */
function parseJsonField(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON: ${error.message}`);
  }
}

/**
 * An API error names its own fields (`max_length`, `max_tokens`); the page says the field's label.
 * @param {string} message
 */
function inPageTerms(message) {
  return message.replace(/\bmax_(length|tokens)\b/g, "Max new tokens");
}

/** The models (and the chosen one's context, which bounds Max new tokens), read again. */
async function refreshModels() {
  await loadModels();
  fillModelPicker(modelSelect);
  boundNewTokens(maxLength, maxLengthHint, modelSelect.value);
}

/** With tools, the prompt goes to /v1/chat/completions as the user's message (tools are chat-only). */
function chatRequestWithTools(body, tools, toolChoice) {
  /** @type {Record<string, any>} */
  const request = {
    ...(body.model !== undefined && { model: body.model }),
    messages: [{ role: "user", content: body.text }],
    tools,
    tool_choice: toolChoice,
    max_tokens: body.max_length,
    temperature: body.temperature,
  };
  for (const [from, to] of [
    ["top_p", "top_p"],
    ["top_k", "top_k"],
    ["seed", "seed"],
    ["stop", "stop"],
  ])
    if (body[from] !== undefined) request[to] = body[from];
  if (body.json_schema)
    request.response_format = {
      type: "json_schema",
      json_schema: { name: "output", schema: body.json_schema },
    };
  return request;
}

/** Runs a chat request with tools; shows the calls and returns a /predict-like summary. */
async function generateWithTools(request, signal, started) {
  const response = await postJson(
    `${config.textgen_url}/v1/chat/completions`,
    request,
    signal,
    "the text generation app",
  );
  const json = await response.json();
  const choice = json.choices?.[0] ?? {};
  showToolCalls(choice.message?.tool_calls ?? []);
  return {
    generated_text: choice.message?.content ?? "",
    tokens_generated: json.usage?.completion_tokens ?? 0,
    finish_reason: choice.finish_reason,
    elapsed_ms: performance.now() - started,
    model_name: json.model,
  };
}

function showToolCalls(calls) {
  toolCallList.replaceChildren(
    ...calls.map((call) => {
      const item = document.createElement("li");
      const name = document.createElement("code");
      name.className = "tool-name";
      name.textContent = call.function?.name ?? "?";
      const args = document.createElement("pre");
      let text = call.function?.arguments ?? "";
      try {
        text = JSON.stringify(JSON.parse(text), null, 2);
      } catch {
        // Shown as it came.
      }
      args.textContent = text;
      item.append(name, args);
      return item;
    }),
  );
  toolCallView.hidden = calls.length === 0;
}

async function generate() {
  if (generation) return;
  /** @type {Record<string, any>} */
  let body;
  let toolsRequest = null;
  try {
    const text = $("#prompt").value;
    if (!text.trim()) throw new Error("Write a prompt first");
    const tooLong = newTokensProblem(maxLength, "Max new tokens", modelSelect.value);
    if (tooLong) throw new Error(tooLong);
    body = {
      text,
      ...(modelSelect.value && { model: modelSelect.value }),
      max_length: optionalNumber(maxLength, true) ?? 128,
      temperature: optionalNumber($("#temperature")) ?? 0.8,
      top_p: optionalNumber($("#top-p")),
      top_k: optionalNumber($("#top-k"), true),
      seed: optionalNumber($("#seed"), true),
      stop: stopSequences($("#stop").value),
      stream: true,
    };
    const schemaText = $("#json-schema").value.trim();
    if (schemaText) body.json_schema = parseJsonField(schemaText, "The JSON schema");
    const toolsText = $("#tools").value.trim();
    if (toolsText) {
      const tools = parseJsonField(toolsText, "Tools");
      if (!Array.isArray(tools)) throw new Error("Tools must be a JSON array of tool definitions");
      toolsRequest = chatRequestWithTools(body, tools, $("#tool-choice").value);
    }
  } catch (error) {
    // The last request's tool calls are not this one's: an error stands alone.
    showToolCalls([]);
    setStatus(generateStatus, error.message, "error");
    return;
  }

  const controller = new AbortController();
  const started = performance.now();
  let tokens = 0;
  /** @type {any} */
  let done = null;
  const ticker = setInterval(() => {
    showGenerationStats({ tokens, finish: "…", elapsedMs: performance.now() - started });
  }, 250);
  generation = controller;
  running.add(controller);
  // JSON (a schema) and tool calls stand alone: the prompt before them would make the output unreadable.
  const structured = Boolean(body.json_schema) || toolsRequest !== null;
  promptEcho.textContent = structured ? "" : body.text;
  output.dataset.format = structured ? "json" : "text";
  generated.textContent = "";
  showToolCalls([]);
  output.dataset.state = "streaming";
  setGenerating(true);
  setStatus(generateStatus, "Generating…");
  showGenerationStats({ tokens: 0, finish: "…", elapsedMs: 0 });

  try {
    if (toolsRequest) {
      done = await generateWithTools(toolsRequest, controller.signal, started);
      generated.textContent = done.generated_text;
    } else {
      const response = await postJson(
        `${config.textgen_url}/predict`,
        body,
        controller.signal,
        "the text generation app",
        { accept: "text/event-stream" },
      );
      if (!isEventStream(response)) {
        done = await response.json();
        generated.textContent = done.generated_text ?? "";
      } else {
        /** @type {any} */
        let streamError = null;
        await readEvents(response, (event, data) => {
          if (event === "done") done = data;
          else if (event === "error") streamError = data;
          else if (data && typeof data.token === "string") {
            tokens++;
            generated.append(data.token);
            // Keep the newest text in view while it streams.
            if (output.scrollHeight - output.scrollTop - output.clientHeight < 80)
              output.scrollTop = output.scrollHeight;
          }
        });
        if (streamError) throw new ApiError(streamError?.error?.message ?? "Generation failed", 500);
        if (!done) throw new ApiError("The stream ended before the generation finished", 0);
      }
    }
    generated.normalize();
    if (typeof done.generated_text === "string" && done.generated_text !== generated.textContent) {
      generated.textContent = done.generated_text;
    }
    output.dataset.state = "done";
    showGenerationStats({
      tokens: done.tokens_generated,
      finish: done.finish_reason,
      elapsedMs: done.elapsed_ms,
      model: done.model_name,
    });
    setStatus(
      generateStatus,
      `Done: ${formatCountOf(done.tokens_generated, "token")}, finish reason “${done.finish_reason}”, ${formatMs(done.elapsed_ms)}.`,
      "ok",
    );
  } catch (error) {
    generated.normalize();
    const elapsedMs = performance.now() - started;
    if (error?.name === "AbortError") {
      output.dataset.state = "stopped";
      showGenerationStats({ tokens, finish: "stopped", elapsedMs });
      setStatus(generateStatus, `Stopped after ${formatCountOf(tokens, "token")}.`);
    } else {
      output.dataset.state = "error";
      showToolCalls([]);
      showGenerationStats({ tokens, finish: "error", elapsedMs });
      setStatus(generateStatus, inPageTerms(error.message ?? String(error)), "error");
    }
  } finally {
    clearInterval(ticker);
    running.delete(controller);
    generation = null;
    setGenerating(false);
  }
}

export function mountGenerate() {
  generateForm.addEventListener("submit", (event) => {
    event.preventDefault();
    void generate();
  });

  generateStop.addEventListener("click", () => generation?.abort());
  modelSelect.addEventListener("change", () => boundNewTokens(maxLength, maxLengthHint, modelSelect.value));
  on("textgen-ready", () => void refreshModels());
  on("tab", (name) => {
    if (name === "generate") void refreshModels();
  });

  $("#prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      generateForm.requestSubmit();
    }
  });
}
