// @ts-check
// Chat: a multi-turn conversation, streamed. Without an index it goes to the text generation app's
// /v1/chat/completions; with "answer from index" to the RAG app's /rag/chat, which condenses the
// conversation into a search, answers from the index and cites its sources.
import { ApiError, errorText, isEventStream, postJson, readEvents, tenant } from "./api.js";
import { cardTitle, describeSource, highlighted, queryStems, sourcesNote } from "./ask.js";
import {
  $,
  el,
  formatCount,
  formatCountOf,
  formatMs,
  optionalNumber,
  prefersReducedMotion,
  requireElement,
  setStatus,
  toggleRunning,
} from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { boundNewTokens, fillModelPicker, loadModels, newTokensProblem } from "./models.js";
import { config, on, running, shared } from "./state.js";

/** @typedef {{ role: "user" | "assistant", content: string }} Message */

/** The conversation so far, as it is sent: the user's turns and the answers (stopped ones too). */
/** @type {Message[]} */
let messages = [];
/** @type {AbortController | null} */
let chatting = null;
/** Numbers the assistant turns, so each turn's source cards have ids of their own. */
let turn = 0;

const log = requireElement("#chat-log");
const form = requireElement("#chat-form");
const input = requireElement("#chat-input");
const sendButton = requireElement("#chat-send");
const stopButton = requireElement("#chat-stop");
const status = requireElement("#chat-status");
const modelSelect = requireElement("#chat-model");
const indexSelect = requireElement("#chat-index");
const maxTokensInput = /** @type {HTMLInputElement} */ (requireElement("#chat-max-tokens"));
const maxTokensHint = requireElement("#chat-max-tokens-hint");

/**
 * One message in the log: the user's text as typed (shown as text), or the assistant's as Markdown.
 * @param {"user" | "assistant"} role
 * @param {string} [text]
 */
function addMessage(role, text = "") {
  const body = el("div", { className: "msg-body" });
  if (role === "user") body.textContent = text;
  const item = el(
    "li",
    { className: `msg msg-${role}`, "data-role": role, "data-state": role === "user" ? "done" : "waiting" },
    el("span", { className: "visually-hidden", text: role === "user" ? "You:" : "Assistant:" }),
    body,
  );
  log.append(item);
  $("#chat-empty").hidden = true;
  return { item, body };
}

/**
 * Keeps the newest text in view while it streams, unless the reader scrolled up. The end of the
 * answer is brought above the sticky composer (the page's scroll padding is its height), never under.
 */
function followLog() {
  const scroller = document.scrollingElement ?? document.documentElement;
  const nearBottom =
    scroller.scrollHeight - scroller.scrollTop - window.innerHeight < 160 + form.offsetHeight;
  if (nearBottom) log.lastElementChild?.scrollIntoView({ block: "end", behavior: "auto" });
}

/** Tells the page's CSS how tall the sticky composer is (it grows with the text typed, and wraps on a phone). */
function trackComposerHeight() {
  const publish = () =>
    document.documentElement.style.setProperty("--chat-composer-height", `${form.offsetHeight}px`);
  new ResizeObserver(publish).observe(form);
  publish();
}

/**
 * The source cards of one answer, each with an id its citations link to.
 * @param {HTMLElement} item the assistant's message
 * @param {Array<Record<string, any>>} results
 * @param {string} searched what was searched (for highlighting)
 * @param {number} answerTurn
 */
function renderSources(item, results, searched, answerTurn) {
  item.querySelector(".msg-sources")?.remove();
  if (results.length === 0) return;
  const stems = queryStems(searched);
  const list = el(
    "ol",
    { className: "results chat-sources" },
    ...results.map((result, index) => {
      const n = index + 1;
      const score = Number(result.score);
      return el(
        "li",
        {
          id: sourceId(answerTurn, n),
          className: "card",
          tabindex: "-1",
          "data-source": n,
          "data-file": result.file,
        },
        el(
          "div",
          { className: "card-head" },
          el("span", { className: "card-number", text: `[${n}]` }),
          el("h4", { className: "card-title", text: cardTitle(result) }),
          el("span", { className: "card-cited", text: "cited", hidden: true }),
          el("span", {
            className: "card-score",
            text: `score ${Number.isFinite(score) ? score.toFixed(3) : "–"}`,
          }),
        ),
        describeSource(result) ? el("p", { className: "card-file", text: describeSource(result) }) : null,
        el("p", { className: "card-text" }, ...highlighted(String(result.text ?? ""), stems)),
      );
    }),
  );
  const details = el(
    "details",
    // Open: the sources are half of an answer from documents; a click folds them away.
    { className: "msg-sources", open: true },
    el("summary", { text: `Sources (${formatCount(results.length)})` }),
    list,
  );
  item.append(details);
}

/**
 * @param {number} answerTurn
 * @param {number} n
 */
function sourceId(answerTurn, n) {
  return `chat-${answerTurn}-source-${n}`;
}

/**
 * Renders an answer as Markdown with [n] linked to its source cards, and marks the cited cards.
 * @param {HTMLElement} item
 * @param {HTMLElement} body
 * @param {string} text
 * @param {number} answerTurn
 * @param {number} sourceCount
 */
function renderAnswer(item, body, text, answerTurn, sourceCount) {
  const cited = new Set();
  renderMarkdown(body, text, {
    cite:
      sourceCount === 0
        ? undefined
        : (numbers) => {
            if (!numbers.every((n) => Number.isInteger(n) && n >= 1 && n <= sourceCount)) return null;
            const span = el("span", { className: "cites" }, "[");
            numbers.forEach((n, i) => {
              if (i > 0) span.append(", ");
              cited.add(n);
              span.append(
                el("a", {
                  href: `#${sourceId(answerTurn, n)}`,
                  className: "cite",
                  "data-source": n,
                  text: String(n),
                  "aria-label": `Source ${n}`,
                }),
              );
            });
            span.append("]");
            return span;
          },
  });
  for (const card of item.querySelectorAll(".msg-sources .card")) {
    const isCited = cited.has(Number(/** @type {HTMLElement} */ (card).dataset.source));
    card.classList.toggle("cited", isCited);
    const badge = /** @type {HTMLElement | null} */ (card.querySelector(".card-cited"));
    if (badge) badge.hidden = !isCited;
  }
}

/**
 * @param {HTMLElement} item
 * @param {string} text
 */
function addNote(item, text) {
  if (!text) return;
  /** @type {HTMLElement} */
  const note = item.querySelector(".msg-note") ?? el("p", { className: "msg-note hint" });
  if (!note.isConnected) item.querySelector(".msg-body")?.after(note);
  note.textContent = note.textContent ? `${note.textContent} ${text}` : text;
}

/**
 * Plain chat with the text generation app: OpenAI's streamed chunks, content deltas appended.
 * @param {AbortSignal} signal
 * @param {(text: string) => void} onText the whole answer so far
 */
async function chatWithModel(signal, onText) {
  /** @type {Record<string, unknown>} */
  const request = { messages, stream: true };
  if (modelSelect.value) request.model = modelSelect.value;
  const length = optionalNumber(maxTokensInput, true);
  if (length !== undefined) request.max_tokens = length;
  const response = await postJson(
    `${config.textgen_url}/v1/chat/completions`,
    request,
    signal,
    "the text generation app",
    { accept: "text/event-stream" },
  );
  let answer = "";
  let model = "";
  let finish = "";
  if (!isEventStream(response)) {
    const whole = await response.json();
    answer = whole.choices?.[0]?.message?.content ?? "";
    onText(answer);
    return { answer, note: `${whole.model ?? ""}` };
  }
  /** @type {any} */
  let streamError = null;
  await readEvents(response, (_event, data) => {
    if (data === "[DONE]" || !data || typeof data !== "object") return;
    if (data.error) {
      streamError = data.error;
      return;
    }
    model = data.model ?? model;
    const choice = data.choices?.[0];
    if (choice?.finish_reason) finish = choice.finish_reason;
    const piece = choice?.delta?.content;
    if (typeof piece === "string" && piece) {
      answer += piece;
      onText(answer);
    }
  });
  if (streamError) throw new ApiError(streamError.message ?? "The answer failed", 500);
  return {
    answer,
    note: [model && `Written by ${model}`, finish && `finish: ${finish}`].filter(Boolean).join(" · "),
  };
}

/** @type {Promise<{ indexField: string } | null> | null} */
let ragChat = null;

/**
 * Whether the RAG app has POST /rag/chat (an older one does not), and what it calls the index field,
 * read once from its OpenAPI document (which needs no key) rather than probed: a probe's 404 would
 * show as an error in the browser's console.
 */
function ragChatRoute() {
  ragChat ??= fetch(`${config.rag_url}/openapi.json`)
    .then((response) => (response.ok ? response.json() : null))
    .then((document) => {
      const operation = document?.paths?.["/rag/chat"]?.post;
      if (!operation) return null;
      const properties = operation.requestBody?.content?.["application/json"]?.schema?.properties ?? {};
      return { indexField: "index" in properties || !("index_name" in properties) ? "index" : "index_name" };
    })
    .catch(() => {
      // Unreachable now: ask again next time rather than remember a guess.
      ragChat = null;
      return null;
    });
  return ragChat;
}

/**
 * Sends the conversation to /rag/chat, or where the RAG app has none, its last question to /rag/query.
 * @param {string} index
 * @param {AbortSignal} signal
 * @returns {Promise<{ response: Response, note: string }>}
 */
async function askIndex(index, signal) {
  const route = await ragChatRoute();
  let note = "";
  let response;
  if (route) {
    /** @type {Record<string, unknown>} */
    const request = { [route.indexField]: index, messages, stream: true };
    if (tenant()) request.tenant_id = tenant();
    response = await postJson(`${config.rag_url}/rag/chat`, request, signal, "the RAG app", {
      accept: "text/event-stream",
    });
  } else {
    const last = messages.filter((message) => message.role === "user").at(-1)?.content ?? "";
    /** @type {Record<string, unknown>} */
    const query = { query: last, index_name: index, answer: "generative", stream: true };
    if (tenant()) query.tenant_id = tenant();
    response = await postJson(`${config.rag_url}/rag/query`, query, signal, "the RAG app", {
      accept: "text/event-stream",
    });
    note = "This server has no /rag/chat: the last question was searched as it stands.";
  }
  return { response, note };
}

/**
 * A conversation answered from an index: /rag/chat with the whole conversation. A server without
 * /rag/chat (an older one) gets the last question on /rag/query, searched as it stands.
 * @param {string} index
 * @param {AbortSignal} signal
 * @param {{ item: HTMLElement, body: HTMLElement, answerTurn: number }} view
 */
async function chatWithIndex(index, signal, view) {
  const { response, note } = await askIndex(index, signal);
  /** @type {Array<Record<string, any>>} */
  let results = [];
  let searched = String(messages.at(-1)?.content ?? "");
  let answer = "";
  /** @param {Record<string, any>} data */
  const takeSearch = (data) => {
    if (typeof data.search_query === "string") searched = data.search_query;
    else if (typeof data.query === "string") searched = data.query;
    if (data.query_rewritten === true) view.item.dataset.rewritten = "true";
    view.item.dataset.searched = searched;
  };
  /** @param {Record<string, any>} whole */
  const finish = (whole) => {
    takeSearch(whole);
    results = whole.results ?? results;
    renderSources(view.item, results, searched, view.answerTurn);
    answer = whole.answer ?? answer;
    renderAnswer(
      view.item,
      view.body,
      answer || "No answer could be composed from these results.",
      view.answerTurn,
      results.length,
    );
    const notes = [note];
    if (view.item.dataset.rewritten === "true") notes.push(`Searched for “${searched}”.`);
    else if (whole.rewrite_skipped_reason && messages.filter((m) => m.role === "user").length > 1)
      notes.push(`Searched the last question as it stands: ${whole.rewrite_skipped_reason}.`);
    notes.push(sourcesNote(whole));
    if (whole.generation_skipped_reason)
      notes.push(`Answered extractively: ${whole.generation_skipped_reason}.`);
    if (whole.generation) {
      notes.push(`Written by ${whole.generation.model} in ${formatMs(whole.generation.elapsed_ms)}.`);
    }
    return { answer, note: notes.filter(Boolean).join(" ") };
  };
  if (!isEventStream(response)) return finish(await response.json());
  /** @type {any} */
  let whole = null;
  /** @type {any} */
  let streamError = null;
  await readEvents(response, (event, data) => {
    if (!data || typeof data !== "object") return;
    if (event === "results") {
      takeSearch(data);
      results = data.results ?? [];
      renderSources(view.item, results, searched, view.answerTurn);
    } else if (event === "done") {
      whole = data;
    } else if (event === "error") {
      streamError = data;
    } else if (typeof data.token === "string") {
      answer += data.token;
      view.item.dataset.state = "streaming";
      renderAnswer(view.item, view.body, answer, view.answerTurn, results.length);
      followLog();
    }
  });
  if (streamError) throw new ApiError(streamError?.error?.message ?? "The answer failed", 500);
  if (!whole) throw new ApiError("The stream ended before the answer was complete", 0);
  return finish(whole);
}

/** @param {boolean} busy */
function setChatting(busy) {
  toggleRunning(sendButton, stopButton, busy);
  log.setAttribute("aria-busy", String(busy));
}

async function send() {
  if (chatting) return;
  const text = input.value.trim();
  if (!text) {
    setStatus(status, "Type a message first.", "error");
    input.focus();
    return;
  }
  const index = indexSelect.value;
  const tooLong = index ? null : newTokensProblem(maxTokensInput, "Length", modelSelect.value);
  if (tooLong) {
    setStatus(status, tooLong, "error");
    maxTokensInput.focus();
    return;
  }
  messages.push({ role: "user", content: text });
  addMessage("user", text);
  input.value = "";
  const answerTurn = ++turn;
  const { item, body } = addMessage("assistant");
  const controller = new AbortController();
  chatting = controller;
  running.add(controller);
  setChatting(true);
  setStatus(status, index ? `Searching “${index}”, then writing…` : "Writing…");
  const started = performance.now();
  let partial = "";
  try {
    const done = index
      ? await chatWithIndex(index, controller.signal, { item, body, answerTurn })
      : await chatWithModel(controller.signal, (answer) => {
          partial = answer;
          item.dataset.state = "streaming";
          renderMarkdown(body, answer);
          followLog();
        });
    partial = done.answer;
    if (!index) renderMarkdown(body, done.answer);
    addNote(item, done.note);
    item.dataset.state = "done";
    messages.push({ role: "assistant", content: done.answer });
    setStatus(status, `Answered in ${formatMs(performance.now() - started)}.`, "ok");
  } catch (error) {
    if (/** @type {any} */ (error)?.name === "AbortError") {
      item.dataset.state = "stopped";
      partial = partial || body.textContent || "";
      // What was written so far stays in the conversation, as it is shown.
      if (partial) messages.push({ role: "assistant", content: partial });
      addNote(item, "Stopped.");
      setStatus(status, "Stopped.");
    } else {
      item.dataset.state = "error";
      addNote(item, errorText(error));
      // The question stays shown but leaves the conversation: sending it again retries it.
      messages.pop();
      setStatus(status, errorText(error), "error");
    }
  } finally {
    running.delete(controller);
    chatting = null;
    setChatting(false);
    if (document.activeElement === document.body || document.activeElement === sendButton) input.focus();
  }
}

function newConversation() {
  chatting?.abort();
  messages = [];
  log.replaceChildren();
  $("#chat-empty").hidden = false;
  setStatus(status, "");
  input.focus();
}

/** The models in the picker, and the chosen one's context bounding the length field. */
async function refreshModels() {
  await loadModels();
  fillModelPicker(modelSelect);
  boundNewTokens(maxTokensInput, maxTokensHint, modelSelect.value);
}

function populateIndices() {
  const current = indexSelect.value;
  indexSelect.replaceChildren(
    el("option", { value: "", text: "No index: the model alone" }),
    ...shared.indices.map((index) =>
      el("option", {
        value: index.name,
        text: `${index.name} (${formatCountOf(index.documents_count, "doc")})`,
      }),
    ),
  );
  if (shared.indices.some((index) => index.name === current)) indexSelect.value = current;
}

export function mountChat() {
  form.addEventListener("submit", (/** @type {Event} */ event) => {
    event.preventDefault();
    void send();
  });
  // Enter sends; Shift+Enter is a new line (and Enter while composing text in an IME is not a send).
  input.addEventListener("keydown", (/** @type {KeyboardEvent} */ event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  stopButton.addEventListener("click", () => chatting?.abort());
  requireElement("#chat-new").addEventListener("click", newConversation);
  trackComposerHeight();
  indexSelect.addEventListener("change", () => {
    // Answers from an index are written by the RAG app, with its own model and length.
    modelSelect.disabled = indexSelect.value !== "";
    maxTokensInput.disabled = indexSelect.value !== "";
  });
  log.addEventListener("click", (/** @type {MouseEvent} */ event) => {
    const link = /** @type {HTMLElement | null} */ (event.target)?.closest?.("a.cite");
    if (!link) return;
    // The URL hash belongs to the tabs; move to the card without touching it.
    event.preventDefault();
    const card = document.getElementById(link.getAttribute("href")?.slice(1) ?? "");
    if (!card) return;
    const details = card.closest("details");
    if (details) details.open = true;
    for (const other of log.querySelectorAll(".card.active")) other.classList.remove("active");
    card.classList.add("active");
    card.scrollIntoView({ behavior: prefersReducedMotion() ? "auto" : "smooth", block: "nearest" });
    card.focus({ preventScroll: true });
  });
  on("indices", populateIndices);
  on("tab", (name) => {
    if (name === "chat") void refreshModels();
  });
  on("textgen-ready", () => void refreshModels());
  modelSelect.addEventListener("change", () =>
    boundNewTokens(maxTokensInput, maxTokensHint, modelSelect.value),
  );
}
