// Lectern playground: plain ES module, no dependencies. One page drives both apps; /ui/config.json
// says where each one is (an empty URL means this page's own origin).

const SUPPORTED = /\.(txt|md|html|pdf|docx)$/i;
const KEY_STORAGE = "lectern.apiKey";
const TENANT_STORAGE = "lectern.tenant";
const NAME_PATTERN = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$/;

const $ = (selector, root = document) => root.querySelector(selector);

const config = { service: "", textgen_url: "", rag_url: "", auth: false };

// ---------------------------------------------------------------------------------------------
// Small helpers

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "className") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child);
  }
  return node;
}

function formatBytes(bytes) {
  if (!Number.isFinite(bytes)) return "–";
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

function formatMs(ms) {
  if (!Number.isFinite(ms)) return "–";
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

const numberFormat = new Intl.NumberFormat();
const formatCount = (n) => (Number.isFinite(n) ? numberFormat.format(n) : "–");

function formatWhen(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso ?? "–";
  const seconds = Math.round((Date.now() - date.getTime()) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return date.toLocaleDateString();
}

function setStatus(node, message, kind = "") {
  node.textContent = message;
  if (kind) node.dataset.kind = kind;
  else delete node.dataset.kind;
}

/**
 * Enables one of a start/stop pair of buttons and keeps keyboard focus on the enabled one, so a
 * button that becomes disabled under the focus does not drop the focus to the page.
 */
function toggleRunning(startButton, stopButton, running) {
  const focused = document.activeElement;
  startButton.disabled = running;
  stopButton.disabled = !running;
  if (running && focused === startButton) stopButton.focus();
  else if (!running && (focused === stopButton || focused === document.body)) startButton.focus();
}

function prefersReducedMotion() {
  return window.matchMedia("(prefers-reduced-motion: reduce)").matches;
}

// ---------------------------------------------------------------------------------------------
// Connection: API key, tenant, and calls to either app

const apiKeyInput = $("#api-key");
const tenantInput = $("#tenant");

function readStorage(key) {
  try {
    return localStorage.getItem(key) ?? "";
  } catch {
    return "";
  }
}

function writeStorage(key, value) {
  try {
    if (value) localStorage.setItem(key, value);
    else localStorage.removeItem(key);
  } catch {
    // Storage may be disabled (private mode); the field still works for this page.
  }
}

function apiKey() {
  return apiKeyInput.value.trim();
}

function tenant() {
  const value = tenantInput.value.trim();
  return NAME_PATTERN.test(value) ? value : "";
}

function authHeaders(extra = {}) {
  const headers = { ...extra };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  return headers;
}

class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

/** The message of an error body in the contract's shape, OpenAI's, or whatever the text says. */
function errorMessage(status, text) {
  let message = "";
  try {
    const body = JSON.parse(text);
    message = body?.error?.message ?? (typeof body?.error === "string" ? body.error : "") ?? "";
  } catch {
    message = text.slice(0, 300);
  }
  if (!message) message = `HTTP ${status}`;
  if (status === 401) message += config.auth || !apiKey() ? " (enter an API key above)" : "";
  return message;
}

async function failure(response) {
  const text = await response.text().catch(() => "");
  return new ApiError(errorMessage(response.status, text), response.status);
}

async function requestJson(base, path, { method = "GET", body, signal } = {}) {
  let response;
  try {
    response = await fetch(`${base}${path}`, {
      method,
      headers: authHeaders(body === undefined ? {} : { "content-type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (error?.name === "AbortError") throw error;
    throw new ApiError(`Cannot reach ${base || window.location.origin}: ${error?.message ?? error}`, 0);
  }
  if (!response.ok) throw await failure(response);
  return response.json();
}

/**
 * Reads a text/event-stream body, calling onEvent(name, data) per event; data is parsed JSON when it
 * parses. Handles events split across network chunks, CRLF line ends and multi-line data.
 */
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const dispatch = (block) => {
    let name = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
    }
    if (data.length === 0) return;
    const raw = data.join("\n");
    let parsed = raw;
    try {
      parsed = JSON.parse(raw);
    } catch {
      // Not JSON: hand the text over as it is.
    }
    onEvent(name, parsed);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let boundary;
    while ((boundary = buffer.indexOf("\n\n")) >= 0) {
      dispatch(buffer.slice(0, boundary));
      buffer = buffer.slice(boundary + 2);
    }
  }
  buffer += decoder.decode();
  if (buffer.trim()) dispatch(buffer);
}

// ---------------------------------------------------------------------------------------------
// Tabs (WAI-ARIA tabs pattern: arrow keys move between tabs, the URL hash remembers the tab)

const tabs = [...document.querySelectorAll('[role="tab"]')];

function selectTab(tab, { focus = false, updateHash = true } = {}) {
  for (const other of tabs) {
    const selected = other === tab;
    other.setAttribute("aria-selected", String(selected));
    other.tabIndex = selected ? 0 : -1;
    document.getElementById(other.getAttribute("aria-controls")).hidden = !selected;
  }
  if (focus) tab.focus();
  const name = tab.id.replace(/^tab-/, "");
  if (updateHash && window.location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  if (name === "indices" || name === "ask") void refreshIndices();
}

for (const tab of tabs) {
  tab.addEventListener("click", () => selectTab(tab));
  tab.addEventListener("keydown", (event) => {
    const index = tabs.indexOf(tab);
    let next = null;
    if (event.key === "ArrowRight") next = tabs[(index + 1) % tabs.length];
    else if (event.key === "ArrowLeft") next = tabs[(index - 1 + tabs.length) % tabs.length];
    else if (event.key === "Home") next = tabs[0];
    else if (event.key === "End") next = tabs[tabs.length - 1];
    if (!next) return;
    event.preventDefault();
    selectTab(next, { focus: true });
  });
}

function tabFromHash() {
  const name = window.location.hash.slice(1);
  return tabs.find((tab) => tab.id === `tab-${name}`) ?? null;
}

window.addEventListener("hashchange", () => {
  const tab = tabFromHash();
  if (tab) selectTab(tab, { updateHash: false });
});

// ---------------------------------------------------------------------------------------------
// Service status

function showService(id, state, detail) {
  const item = document.getElementById(id);
  item.dataset.state = state;
  $(".service-detail", item).textContent = detail;
}

async function checkTextgen() {
  try {
    const response = await fetch(`${config.textgen_url}/health`);
    const body = await response.json().catch(() => ({}));
    if (response.ok) {
      showService("svc-textgen", "ok", body.model_name ?? "ready");
      modelName = body.model_name ?? "";
      return;
    }
    if (body.status === "loading") {
      showService("svc-textgen", "loading", "loading the model…");
      setTimeout(checkTextgen, 3000);
      return;
    }
    showService("svc-textgen", "down", body.reason ? `unhealthy: ${body.reason}` : `HTTP ${response.status}`);
  } catch {
    showService("svc-textgen", "down", "not reachable");
  }
}

async function checkRag() {
  try {
    const response = await fetch(`${config.rag_url}/health`);
    const body = await response.json().catch(() => ({}));
    if (response.ok) showService("svc-rag", "ok", body.storage ? `ready (${body.storage})` : "ready");
    else showService("svc-rag", "down", `HTTP ${response.status}`);
  } catch {
    showService("svc-rag", "down", "not reachable");
  }
}

// ---------------------------------------------------------------------------------------------
// Generate

const generateForm = $("#generate-form");
const generateButton = $("#generate-button");
const generateStop = $("#generate-stop");
const generateStatus = $("#generate-status");
const output = $("#generate-output");
const promptEcho = $(".prompt-echo", output);
const generated = $(".generated", output);
const toolCallView = $("#tool-calls");
const toolCallList = $("#tool-calls ol");
const stats = Object.fromEntries(
  [...document.querySelectorAll("#generate-stats [data-stat]")].map((node) => [node.dataset.stat, node]),
);
let modelName = "";
let generation = null;

function optionalNumber(input, integer = false) {
  const raw = input.value.trim();
  if (raw === "") return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw new Error(
      `${input.labels?.[0]?.textContent ?? input.id} must be ${integer ? "a whole number" : "a number"}`,
    );
  }
  return value;
}

function stopSequences(raw) {
  const parts = raw
    .split("|")
    .map((part) => part.replace(/\\n/g, "\n").replace(/\\t/g, "\t"))
    .filter((part) => part.length > 0);
  if (parts.length > 4) throw new Error("Give at most 4 stop sequences");
  if (parts.length === 0) return undefined;
  return parts.length === 1 ? parts[0] : parts;
}

function showGenerationStats({ tokens, finish, elapsedMs, model }) {
  stats.tokens.textContent = formatCount(tokens);
  stats.finish.textContent = finish ?? "–";
  stats.elapsed.textContent = formatMs(elapsedMs);
  stats.speed.textContent =
    elapsedMs > 0 && tokens > 0 ? `${(tokens / (elapsedMs / 1000)).toFixed(1)} tok/s` : "–";
  stats.model.textContent = model || modelName || "–";
}

function setGenerating(running) {
  toggleRunning(generateButton, generateStop, running);
  output.setAttribute("aria-busy", String(running));
}

/** Parses a JSON text box, or throws an error saying which box and why. */
function parseJsonField(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON: ${error.message}`);
  }
}

/** With tools, the prompt goes to /v1/chat/completions as the user's message (tools are chat-only). */
function chatRequestWithTools(body, tools, toolChoice) {
  const request = {
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
  let response;
  try {
    response = await fetch(`${config.textgen_url}/v1/chat/completions`, {
      method: "POST",
      headers: authHeaders({ "content-type": "application/json" }),
      body: JSON.stringify(request),
      signal,
    });
  } catch (error) {
    if (error?.name === "AbortError") throw error;
    throw new ApiError(`Cannot reach the text generation app: ${error?.message ?? error}`, 0);
  }
  if (!response.ok) throw await failure(response);
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
  let body;
  let toolsRequest = null;
  try {
    const text = $("#prompt").value;
    if (!text.trim()) throw new Error("Write a prompt first");
    body = {
      text,
      max_length: optionalNumber($("#max-length"), true) ?? 128,
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
    setStatus(generateStatus, error.message, "error");
    return;
  }

  const controller = new AbortController();
  const started = performance.now();
  let tokens = 0;
  let done = null;
  const ticker = setInterval(() => {
    showGenerationStats({ tokens, finish: "…", elapsedMs: performance.now() - started });
  }, 250);
  generation = controller;
  promptEcho.textContent = body.text;
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
      let response;
      try {
        response = await fetch(`${config.textgen_url}/predict`, {
          method: "POST",
          headers: authHeaders({ "content-type": "application/json", accept: "text/event-stream" }),
          body: JSON.stringify(body),
          signal: controller.signal,
        });
      } catch (error) {
        if (error?.name === "AbortError") throw error;
        throw new ApiError(`Cannot reach the text generation app: ${error?.message ?? error}`, 0);
      }
      if (!response.ok) throw await failure(response);
      const type = response.headers.get("content-type") ?? "";
      if (!type.includes("text/event-stream")) {
        done = await response.json();
        generated.textContent = done.generated_text ?? "";
      } else {
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
      `Done: ${formatCount(done.tokens_generated)} tokens, finish reason “${done.finish_reason}”, ${formatMs(done.elapsed_ms)}.`,
      "ok",
    );
  } catch (error) {
    generated.normalize();
    const elapsedMs = performance.now() - started;
    if (error?.name === "AbortError") {
      output.dataset.state = "stopped";
      showGenerationStats({ tokens, finish: "stopped", elapsedMs });
      setStatus(generateStatus, `Stopped after ${formatCount(tokens)} tokens.`);
    } else {
      output.dataset.state = "error";
      showGenerationStats({ tokens, finish: "error", elapsedMs });
      setStatus(generateStatus, error.message ?? String(error), "error");
    }
  } finally {
    clearInterval(ticker);
    generation = null;
    setGenerating(false);
  }
}

generateForm.addEventListener("submit", (event) => {
  event.preventDefault();
  void generate();
});

generateStop.addEventListener("click", () => generation?.abort());

// Escape stops whatever is streaming.
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  if (generation) generation.abort();
  else if (asking) asking.abort();
});

$("#prompt").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    generateForm.requestSubmit();
  }
});

// ---------------------------------------------------------------------------------------------
// Indices: build from files, list, delete

const buildForm = $("#build-form");
const buildButton = $("#build-button");
const buildCancel = $("#build-cancel");
const buildStatus = $("#build-status");
const buildProgress = $("#build-progress");
const buildPhase = $("#build-phase");
const buildBar = $("#build-bar");
const buildDetail = $("#build-detail");
const dropZone = $("#drop-zone");
const fileInput = $("#files");
const fileList = $("#file-list");
const indexNameInput = $("#index-name");
const indicesTable = $("#indices-table");
const indicesBody = $("tbody", indicesTable);
const indicesEmpty = $("#indices-empty");
const indicesStatus = $("#indices-status");
const askIndex = $("#ask-index");

let chosenFiles = [];
let upload = null;
let indices = [];

function fileKey(file) {
  return `${file.name}\u0000${file.size}\u0000${file.lastModified}`;
}

function addFiles(files) {
  const skipped = [];
  const known = new Set(chosenFiles.map(fileKey));
  for (const file of files) {
    if (!SUPPORTED.test(file.name)) {
      skipped.push(file.name);
      continue;
    }
    if (known.has(fileKey(file))) continue;
    known.add(fileKey(file));
    chosenFiles.push(file);
  }
  if (!indexNameInput.value && chosenFiles.length > 0) {
    const stem = chosenFiles[0].name.replace(/\.[^.]+$/, "").replace(/[^A-Za-z0-9._-]+/g, "-");
    const name = stem.replace(/^[-.]+|[-.]+$/g, "").slice(0, 64);
    if (NAME_PATTERN.test(name)) indexNameInput.value = name;
  }
  renderFiles();
  if (skipped.length > 0) {
    setStatus(
      buildStatus,
      `Skipped ${skipped.join(", ")}: only .txt .md .html .pdf .docx are indexed.`,
      "error",
    );
  } else if (chosenFiles.length > 0) {
    setStatus(
      buildStatus,
      `${chosenFiles.length} file${chosenFiles.length === 1 ? "" : "s"} ready to index.`,
    );
  }
}

function renderFiles() {
  fileList.replaceChildren(
    ...chosenFiles.map((file, index) =>
      el(
        "li",
        {},
        el("span", { className: "file-name", text: file.name }),
        el("span", { className: "file-size", text: formatBytes(file.size) }),
        el("button", {
          type: "button",
          className: "secondary small",
          text: "Remove",
          "aria-label": `Remove ${file.name}`,
          onclick: () => {
            chosenFiles.splice(index, 1);
            renderFiles();
            fileInput.focus();
          },
        }),
      ),
    ),
  );
}

fileInput.addEventListener("change", () => {
  addFiles([...fileInput.files]);
  // Cleared so choosing the same file again still fires change; the list above keeps the files.
  fileInput.value = "";
});

let dragDepth = 0;
dropZone.addEventListener("dragenter", (event) => {
  event.preventDefault();
  dragDepth++;
  dropZone.classList.add("dragging");
});
dropZone.addEventListener("dragover", (event) => {
  event.preventDefault();
  if (event.dataTransfer) event.dataTransfer.dropEffect = "copy";
});
dropZone.addEventListener("dragleave", () => {
  dragDepth = Math.max(0, dragDepth - 1);
  if (dragDepth === 0) dropZone.classList.remove("dragging");
});
dropZone.addEventListener("drop", (event) => {
  event.preventDefault();
  dragDepth = 0;
  dropZone.classList.remove("dragging");
  addFiles([...(event.dataTransfer?.files ?? [])]);
});
// A file dropped beside the zone must not navigate away from the page.
for (const type of ["dragover", "drop"]) {
  window.addEventListener(type, (event) => {
    if (!dropZone.contains(event.target)) event.preventDefault();
  });
}

function setBuilding(running) {
  const focused = document.activeElement;
  buildButton.disabled = running;
  buildCancel.hidden = !running;
  buildForm.setAttribute("aria-busy", String(running));
  if (running && focused === buildButton) buildCancel.focus();
  else if (!running && (focused === buildCancel || focused === document.body)) buildButton.focus();
}

function buildIndex() {
  if (upload) return;
  const name = indexNameInput.value.trim();
  if (!NAME_PATTERN.test(name)) {
    setStatus(buildStatus, "Give the index a name: letters, digits, . _ - (up to 128).", "error");
    indexNameInput.focus();
    return;
  }
  if (chosenFiles.length === 0) {
    setStatus(buildStatus, "Add at least one file to index.", "error");
    fileInput.focus();
    return;
  }
  const form = new FormData();
  form.append("index_name", name);
  if (tenant()) form.append("tenant_id", tenant());
  form.append("scorer", $("#scorer").value);
  form.append("chunk_size", $("#chunk-size").value.trim() || "1000");
  const overlap = $("#overlap").value.trim();
  if (overlap) form.append("overlap", overlap);
  form.append("mode", $("#build-mode").value);
  for (const file of chosenFiles) form.append("files", file, file.name);
  const totalBytes = chosenFiles.reduce((sum, file) => sum + file.size, 0);
  const fileCount = chosenFiles.length;

  const xhr = new XMLHttpRequest();
  upload = xhr;
  const started = performance.now();
  let indexingTimer = null;
  const finish = () => {
    clearInterval(indexingTimer);
    upload = null;
    setBuilding(false);
  };

  setBuilding(true);
  buildProgress.hidden = false;
  buildPhase.textContent = "Uploading…";
  buildBar.max = 1;
  buildBar.value = 0;
  buildDetail.textContent = `0 of ${formatBytes(totalBytes)}`;
  setStatus(buildStatus, `Uploading ${fileCount} file${fileCount === 1 ? "" : "s"}…`);

  xhr.upload.addEventListener("progress", (event) => {
    if (!event.lengthComputable) return;
    buildBar.value = event.loaded / event.total;
    buildDetail.textContent = `${Math.round((event.loaded / event.total) * 100)}% · ${formatBytes(event.loaded)} of ${formatBytes(event.total)}`;
  });
  xhr.upload.addEventListener("load", () => {
    // Everything is sent; the server now reads, chunks and indexes the files.
    buildPhase.textContent = "Indexing…";
    buildBar.removeAttribute("value");
    const indexingStarted = performance.now();
    buildDetail.textContent = "";
    indexingTimer = setInterval(() => {
      buildDetail.textContent = `${Math.round((performance.now() - indexingStarted) / 1000)} s`;
    }, 500);
    setStatus(buildStatus, `Indexing ${fileCount} file${fileCount === 1 ? "" : "s"}…`);
  });
  xhr.addEventListener("load", () => {
    finish();
    buildProgress.hidden = true;
    if (xhr.status >= 200 && xhr.status < 300) {
      let body = {};
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        // A 2xx without JSON still means built.
      }
      setStatus(
        buildStatus,
        `Built “${body.index_name ?? name}”: ${formatCount(body.documents_count)} documents, ${formatCount(body.chunks_count)} chunks, ${formatCount(body.vocabulary_size)} terms in ${formatMs(body.build_ms ?? performance.now() - started)}.`,
        "ok",
      );
      chosenFiles = [];
      renderFiles();
      void refreshIndices({ highlight: body.index_name ?? name, select: body.index_name ?? name });
    } else {
      setStatus(buildStatus, `Build failed: ${errorMessage(xhr.status, xhr.responseText)}`, "error");
    }
  });
  xhr.addEventListener("error", () => {
    finish();
    buildProgress.hidden = true;
    setStatus(buildStatus, "Build failed: the RAG app could not be reached.", "error");
  });
  xhr.addEventListener("abort", () => {
    finish();
    buildProgress.hidden = true;
    setStatus(buildStatus, "Build cancelled; the index is as it was.");
  });

  xhr.open("POST", `${config.rag_url}/rag/build`);
  xhr.setRequestHeader("accept", "application/json");
  const key = apiKey();
  if (key) xhr.setRequestHeader("Authorization", `Bearer ${key}`);
  xhr.send(form);
}

buildForm.addEventListener("submit", (event) => {
  event.preventDefault();
  buildIndex();
});
buildCancel.addEventListener("click", () => upload?.abort());

function tenantQuery(prefix = "?") {
  return tenant() ? `${prefix}tenant_id=${encodeURIComponent(tenant())}` : "";
}

let refreshing = null;
let configLoaded = false;
async function refreshIndices(options = {}) {
  // Not before config.json has said where the RAG app is.
  if (!configLoaded) return;
  // Coalesce: a refresh already under way is followed by one more, not by many.
  if (refreshing) {
    await refreshing;
  }
  refreshing = (async () => {
    try {
      const body = await requestJson(config.rag_url, `/rag/indices${tenantQuery()}`);
      indices = body.indices ?? [];
      renderIndices(options.highlight);
      setStatus(indicesStatus, "");
      populateAskIndex(options.select);
    } catch (error) {
      setStatus(indicesStatus, `Could not list indices: ${error.message}`, "error");
    }
  })();
  try {
    await refreshing;
  } finally {
    refreshing = null;
  }
}

function renderIndices(highlight) {
  indicesBody.replaceChildren(
    ...indices.map((index) => {
      const cell = (label, text, className = "") => el("td", { "data-label": label, className, text });
      const row = el(
        "tr",
        { "data-index": index.name, className: index.name === highlight ? "highlight" : "" },
        el("th", { scope: "row", className: "index-name", title: index.name }, index.name),
        cell("Scorer", index.scorer === "bm25" ? "BM25" : "TF-IDF"),
        cell("Documents", formatCount(index.documents_count), "num"),
        cell("Chunks", formatCount(index.chunks_count), "num"),
        cell("Terms", formatCount(index.vocabulary_size), "num"),
        cell("Size", formatBytes(index.size_bytes), "num"),
        el(
          "td",
          { "data-label": "Updated" },
          el("time", {
            datetime: index.updated_at,
            title: index.updated_at,
            text: formatWhen(index.updated_at),
          }),
        ),
        el(
          "td",
          { className: "row-cell" },
          el(
            "div",
            { className: "row-actions" },
            el("button", {
              type: "button",
              className: "secondary small",
              text: "Ask",
              "aria-label": `Ask ${index.name}`,
              onclick: () => {
                populateAskIndex(index.name);
                selectTab($("#tab-ask"));
                $("#question").focus();
              },
            }),
            el("button", {
              type: "button",
              className: "danger small",
              text: "Delete",
              "aria-label": `Delete ${index.name}`,
              onclick: () => void deleteIndex(index.name),
            }),
          ),
        ),
      );
      return row;
    }),
  );
  indicesTable.hidden = indices.length === 0;
  indicesEmpty.hidden = indices.length !== 0;
}

async function deleteIndex(name) {
  if (!window.confirm(`Delete the index “${name}” and all its documents? This cannot be undone.`)) return;
  setStatus(indicesStatus, `Deleting “${name}”…`);
  try {
    await requestJson(config.rag_url, `/rag/indices/${encodeURIComponent(name)}${tenantQuery()}`, {
      method: "DELETE",
    });
    await refreshIndices();
    setStatus(indicesStatus, `Deleted “${name}”.`, "ok");
    $("#indices-refresh").focus();
  } catch (error) {
    setStatus(indicesStatus, `Could not delete “${name}”: ${error.message}`, "error");
  }
}

$("#indices-refresh").addEventListener("click", () => void refreshIndices());

function populateAskIndex(select) {
  const current = select ?? askIndex.value;
  askIndex.replaceChildren(
    ...(indices.length === 0
      ? [el("option", { value: "", text: "No indices yet" })]
      : indices.map((index) =>
          el("option", {
            value: index.name,
            text: `${index.name} (${formatCount(index.documents_count)} docs)`,
          }),
        )),
  );
  if (indices.some((index) => index.name === current)) askIndex.value = current;
}

// ---------------------------------------------------------------------------------------------
// Ask: query an index, show the answer with citations linked to the source cards

const askForm = $("#ask-form");
const askButton = $("#ask-button");
const askStop = $("#ask-stop");
const askStatus = $("#ask-status");
const answerSection = $("#answer");
const answerText = $("#answer-text");
const answerNote = $("#answer-note");
const answerBadge = $("#answer-mode-badge");
const sourcesSection = $("#sources");
const resultsList = $("#results");
let asking = null;
let currentResults = [];

const STOP_WORDS = new Set(
  (
    "a an and are as at be but by can did do does for from has have how i if in into is it its me my no not " +
    "of on or our so than that the their them then there these they this to was we were what when where " +
    "which who why will with you your"
  ).split(" "),
);

/** Query words reduced to a crude stem, so "migrating" also marks "migrate" and "migrates". */
function queryStems(query) {
  const stems = new Set();
  for (const word of query.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if (word.length < 2 || STOP_WORDS.has(word)) continue;
    let stem = word;
    for (const suffix of ["ing", "ed", "es", "s", "ly", "e"]) {
      if (stem.endsWith(suffix) && stem.length - suffix.length >= 3) {
        stem = stem.slice(0, -suffix.length);
        break;
      }
    }
    stems.add(stem);
  }
  return [...stems].sort((a, b) => b.length - a.length);
}

/** The text as nodes, with words starting with one of the stems in <mark>. */
function highlighted(text, stems) {
  if (stems.length === 0) return [document.createTextNode(text)];
  const escaped = stems.map((stem) => stem.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(?:${escaped.join("|")})[\\p{L}\\p{N}]*`, "giu");
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    nodes.push(el("mark", { text: match[0] }));
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

function activateSource(number, { focus = true } = {}) {
  const card = document.getElementById(`source-${number}`);
  if (!card) return;
  for (const other of resultsList.querySelectorAll(".card.active")) other.classList.remove("active");
  card.classList.add("active");
  card.scrollIntoView({ behavior: prefersReducedMotion() ? "auto" : "smooth", block: "nearest" });
  if (focus) card.focus({ preventScroll: true });
}

/** Renders answer text with [n], [n, m] and [n][m] as links to the source cards they cite. */
function renderAnswer(text) {
  const nodes = [];
  const cited = new Set();
  let last = 0;
  for (const match of text.matchAll(/\[(\d+(?:\s*[,;]\s*\d+)*)\]/g)) {
    const numbers = match[1].split(/[,;]/).map((part) => Number(part.trim()));
    if (!numbers.every((n) => Number.isInteger(n) && n >= 1 && n <= currentResults.length)) continue;
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    nodes.push("[");
    numbers.forEach((n, i) => {
      if (i > 0) nodes.push(", ");
      cited.add(n);
      const source = currentResults[n - 1];
      nodes.push(
        el("a", {
          href: `#source-${n}`,
          className: "cite",
          "data-source": n,
          text: String(n),
          title: source?.title || source?.file || `Source ${n}`,
          "aria-label": `Source ${n}${source?.title ? `: ${source.title}` : ""}`,
        }),
      );
    });
    nodes.push("]");
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  answerText.replaceChildren(...nodes);
  for (const card of resultsList.querySelectorAll(".card")) {
    const isCited = cited.has(Number(card.dataset.source));
    card.classList.toggle("cited", isCited);
    const badge = $(".card-cited", card);
    if (badge) badge.hidden = !isCited;
  }
}

answerText.addEventListener("click", (event) => {
  const link = event.target.closest?.("a.cite");
  if (!link) return;
  // The URL hash belongs to the tabs; move to the card without touching it.
  event.preventDefault();
  activateSource(link.dataset.source);
});

function renderResults(results, query) {
  currentResults = results;
  const stems = queryStems(query);
  resultsList.replaceChildren(
    ...results.map((result, index) => {
      const n = index + 1;
      const score = Number(result.score);
      const titleId = `source-${n}-title`;
      return el(
        "li",
        {
          id: `source-${n}`,
          className: "card",
          tabindex: "-1",
          "data-source": n,
          "data-file": result.file,
          "aria-labelledby": titleId,
        },
        el(
          "div",
          { className: "card-head" },
          el("span", { className: "card-number", text: `[${n}]` }),
          el("h4", { className: "card-title", id: titleId, text: cardTitle(result) }),
          el("span", { className: "card-cited", text: "cited", hidden: true }),
          el(
            "span",
            { className: "card-score" },
            el("meter", { min: "0", max: "1", value: String(score), "aria-label": "score" }),
            `score ${Number.isFinite(score) ? score.toFixed(3) : "–"}`,
          ),
        ),
        describeSource(result) ? el("p", { className: "card-file", text: describeSource(result) }) : null,
        el("p", { className: "card-text" }, ...highlighted(result.text, stems)),
      );
    }),
  );
  sourcesSection.hidden = results.length === 0;
}

function cardTitle(result) {
  return result.title || result.file || result.document_id;
}

/** The file (unless it is the title already) and the page or pages a result comes from (PDFs). */
function describeSource(result) {
  const file = result.file || result.document_id;
  const parts = file && file !== cardTitle(result) ? [file] : [];
  const { page, pages } = result.metadata ?? {};
  if (Array.isArray(pages) && pages.length > 1) parts.push(`pages ${pages[0]}–${pages[pages.length - 1]}`);
  else if (Number.isInteger(page)) parts.push(`page ${page}`);
  return parts.join(" · ");
}

function setAsking(running) {
  toggleRunning(askButton, askStop, running);
  answerText.setAttribute("aria-busy", String(running));
}

const MODE_LABELS = { extractive: "extractive", generative: "generative", none: "results only" };

function finishAnswer(whole, started) {
  currentResults = whole.results ?? currentResults;
  answerBadge.textContent = MODE_LABELS[whole.answer_mode] ?? whole.answer_mode ?? "";
  if (whole.answer) {
    answerSection.hidden = false;
    renderAnswer(whole.answer);
  } else if (whole.answer_mode === "none") {
    answerSection.hidden = true;
  } else {
    answerSection.hidden = false;
    answerText.replaceChildren("No answer could be composed from these results.");
  }
  const notes = [];
  if (whole.generation_skipped_reason)
    notes.push(`Answered extractively: ${whole.generation_skipped_reason}.`);
  if (whole.generation) {
    notes.push(
      `Written by ${whole.generation.model} in ${formatMs(whole.generation.elapsed_ms)} (${whole.generation.tokens} tokens).`,
    );
  }
  answerNote.textContent = notes.join(" ");
  answerText.dataset.state = "done";
  const count = whole.count ?? currentResults.length;
  setStatus(
    askStatus,
    count === 0
      ? "No results: try other words."
      : `${count} result${count === 1 ? "" : "s"}, searched in ${formatMs(whole.elapsed_ms)}, answered in ${formatMs(performance.now() - started)}.`,
    count === 0 ? "" : "ok",
  );
}

async function ask() {
  if (asking) return;
  const query = $("#question").value.trim();
  const index = askIndex.value;
  if (!index) {
    setStatus(askStatus, "Build an index first (Indices tab), then pick it here.", "error");
    return;
  }
  if (!query) {
    setStatus(askStatus, "Type a question first.", "error");
    $("#question").focus();
    return;
  }
  let topK;
  try {
    topK = optionalNumber($("#ask-top-k"), true) ?? 5;
  } catch (error) {
    setStatus(askStatus, error.message, "error");
    return;
  }
  const mode = $("#answer-mode").value;
  const body = { query, index_name: index, top_k: topK, answer: mode };
  if (tenant()) body.tenant_id = tenant();
  if (mode === "generative") body.stream = true;

  const controller = new AbortController();
  asking = controller;
  const started = performance.now();
  setAsking(true);
  setStatus(askStatus, mode === "generative" ? "Searching, then writing an answer…" : "Searching…");
  answerText.dataset.state = "waiting";
  answerNote.textContent = "";
  let streamedAnswer = "";

  try {
    let response;
    try {
      response = await fetch(`${config.rag_url}/rag/query`, {
        method: "POST",
        headers: authHeaders({ "content-type": "application/json" }),
        body: JSON.stringify(body),
        signal: controller.signal,
      });
    } catch (error) {
      if (error?.name === "AbortError") throw error;
      throw new ApiError(`Cannot reach the RAG app: ${error?.message ?? error}`, 0);
    }
    if (!response.ok) throw await failure(response);
    const type = response.headers.get("content-type") ?? "";
    if (!type.includes("text/event-stream")) {
      const whole = await response.json();
      renderResults(whole.results ?? [], query);
      finishAnswer(whole, started);
      return;
    }
    let whole = null;
    let streamError = null;
    await readEvents(response, (event, data) => {
      if (event === "results") {
        renderResults(data.results ?? [], query);
        answerSection.hidden = false;
        answerBadge.textContent = "generative";
        answerText.replaceChildren();
        answerText.dataset.state = "streaming";
        setStatus(askStatus, `${data.count ?? 0} results; writing the answer…`);
      } else if (event === "done") {
        whole = data;
      } else if (event === "error") {
        streamError = data;
      } else if (data && typeof data.token === "string") {
        streamedAnswer += data.token;
        renderAnswer(streamedAnswer);
      }
    });
    if (streamError) throw new ApiError(streamError?.error?.message ?? "The answer failed", 500);
    if (!whole) throw new ApiError("The stream ended before the answer was complete", 0);
    renderResults(whole.results ?? currentResults, query);
    finishAnswer(whole, started);
  } catch (error) {
    answerText.dataset.state = "done";
    if (error?.name === "AbortError") {
      setStatus(askStatus, "Stopped.");
    } else {
      setStatus(askStatus, error.message ?? String(error), "error");
    }
  } finally {
    asking = null;
    setAsking(false);
  }
}

askForm.addEventListener("submit", (event) => {
  event.preventDefault();
  void ask();
});
askStop.addEventListener("click", () => asking?.abort());

// ---------------------------------------------------------------------------------------------
// Start-up

async function loadConfig() {
  try {
    const response = await fetch("config.json", { cache: "no-store" });
    if (response.ok) Object.assign(config, await response.json());
  } catch {
    // Opened from elsewhere: assume both APIs are on this origin.
  }
}

function applyAuth() {
  const banner = $("#auth-banner");
  const connection = $("#connection");
  const needsKey = config.auth && !apiKey();
  banner.hidden = !needsKey;
  connection.classList.toggle("needs-key", config.auth);
  apiKeyInput.placeholder = config.auth ? "required" : "optional";
  apiKeyInput.required = config.auth;
}

async function main() {
  apiKeyInput.value = readStorage(KEY_STORAGE);
  tenantInput.value = readStorage(TENANT_STORAGE);
  apiKeyInput.addEventListener("change", () => {
    writeStorage(KEY_STORAGE, apiKey());
    applyAuth();
    void refreshIndices();
  });
  tenantInput.addEventListener("change", () => {
    writeStorage(TENANT_STORAGE, tenant());
    void refreshIndices();
  });
  $("#connection").addEventListener("submit", (event) => event.preventDefault());
  const keyToggle = $("#api-key-toggle");
  keyToggle.addEventListener("click", () => {
    const show = apiKeyInput.type === "password";
    apiKeyInput.type = show ? "text" : "password";
    keyToggle.textContent = show ? "Hide" : "Show";
    keyToggle.setAttribute("aria-pressed", String(show));
  });

  const initial = tabFromHash();
  if (initial) selectTab(initial, { updateHash: false });

  await loadConfig();
  configLoaded = true;
  applyAuth();
  $("#footer-service").textContent =
    config.service === "rag"
      ? "Served by the RAG app."
      : config.service
        ? "Served by the text generation app."
        : "";
  if (config.auth && !apiKey()) apiKeyInput.focus();
  await Promise.all([checkTextgen(), checkRag(), refreshIndices()]);
  document.body.dataset.ready = "true";
}

void main();
