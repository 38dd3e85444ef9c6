// @ts-check
// Ask: query an index, show the answer with citations linked to the source cards.
import { ApiError, isEventStream, postJson, readEvents, tenant } from "./api.js";
import {
  $,
  el,
  formatCount,
  formatCountOf,
  formatMs,
  optionalNumber,
  prefersReducedMotion,
  setStatus,
  toggleRunning,
} from "./dom.js";
import { config, on, running, shared } from "./state.js";
import { showTab } from "./tabs.js";

const askIndex = $("#ask-index");
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
export function queryStems(query) {
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
export function highlighted(text, stems) {
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

export function cardTitle(result) {
  return result.title || result.file || result.document_id;
}

/**
 * Where a result comes from: the file (unless it is the title already), the page or pages (PDFs and
 * scans: "p. 3", "pp. 3–4") and the heading path it sits under (Markdown, HTML, DOCX: "Setup › Linux").
 * The app serves no document's file, so a citation is a label, not a link.
 */
export function describeSource(result) {
  const file = result.file || result.document_id;
  const parts = file && file !== cardTitle(result) ? [file] : [];
  const { page, pages, headings } = result.metadata ?? {};
  if (Array.isArray(pages) && pages.length > 1) parts.push(`pp. ${pages[0]}–${pages[pages.length - 1]}`);
  else if (Number.isInteger(page)) parts.push(`p. ${page}`);
  if (
    Array.isArray(headings) &&
    headings.length > 0 &&
    headings.every((heading) => typeof heading === "string")
  ) {
    parts.push(headings.join(" › "));
  }
  return parts.join(" · ");
}

function setAsking(busy) {
  toggleRunning(askButton, askStop, busy);
  answerText.setAttribute("aria-busy", String(busy));
}

const MODE_LABELS = { extractive: "extractive", generative: "generative", none: "results only" };

/**
 * How many results an answer was written from (`sources_used`), and whether it was cut at its length
 * limit, as a note; "" when the response does not say.
 * @param {Record<string, any>} whole the response of /rag/query or /rag/chat
 */
export function sourcesNote(whole) {
  const used = whole.sources_used;
  if (typeof used !== "number" || whole.answer_mode === "none") return "";
  const count = whole.count ?? whole.results?.length ?? used;
  const results = (n) => `${n} result${n === 1 ? "" : "s"}`;
  if (whole.answer_mode !== "generative") return `Quoted from ${results(used)}.`;
  const context = whole.generation?.context_tokens;
  const from =
    used < count
      ? `Written from the top ${results(used)} of ${count}: that is what fits the model's context of ${formatCount(context)} tokens per request.`
      : `Written from ${count === 1 ? "the one result" : `all ${results(count)}`}.`;
  return whole.generation?.finish_reason === "length" ? `${from} Cut at its length limit.` : from;
}

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
  const notes = [sourcesNote(whole)].filter(Boolean);
  if (whole.generation_skipped_reason)
    notes.push(`Answered extractively: ${whole.generation_skipped_reason}.`);
  if (whole.generation) {
    notes.push(
      `Written by ${whole.generation.model} in ${formatMs(whole.generation.elapsed_ms)} (${formatCountOf(whole.generation.tokens, "token")}).`,
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
  running.add(controller);
  const started = performance.now();
  setAsking(true);
  setStatus(askStatus, mode === "generative" ? "Searching, then writing an answer…" : "Searching…");
  answerText.dataset.state = "waiting";
  answerNote.textContent = "";
  let streamedAnswer = "";

  try {
    const response = await postJson(`${config.rag_url}/rag/query`, body, controller.signal, "the RAG app");
    if (!isEventStream(response)) {
      const whole = await response.json();
      renderResults(whole.results ?? [], query);
      finishAnswer(whole, started);
      return;
    }
    /** @type {any} */
    let whole = null;
    /** @type {any} */
    let streamError = null;
    await readEvents(response, (event, data) => {
      if (event === "results") {
        renderResults(data.results ?? [], query);
        answerSection.hidden = false;
        answerBadge.textContent = "generative";
        answerText.replaceChildren();
        answerText.dataset.state = "streaming";
        const given =
          typeof data.sources_used === "number" ? `, ${data.sources_used} given to the model` : "";
        setStatus(askStatus, `${formatCountOf(data.count ?? 0, "result")}${given}; writing the answer…`);
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
    running.delete(controller);
    asking = null;
    setAsking(false);
  }
}

/** @param {string} [select] the index to pick, else the one picked stays */
function populateAskIndex(select) {
  const current = select ?? askIndex.value;
  askIndex.replaceChildren(
    ...(shared.indices.length === 0
      ? [el("option", { value: "", text: "No indices yet" })]
      : shared.indices.map((index) =>
          el("option", {
            value: index.name,
            text: `${index.name} (${formatCountOf(index.documents_count, "doc")})`,
          }),
        )),
  );
  if (shared.indices.some((index) => index.name === current)) askIndex.value = current;
}

export function mountAsk() {
  answerText.addEventListener("click", (event) => {
    const link = event.target.closest?.("a.cite");
    if (!link) return;
    // The URL hash belongs to the tabs; move to the card without touching it.
    event.preventDefault();
    activateSource(link.dataset.source);
  });

  askForm.addEventListener("submit", (event) => {
    event.preventDefault();
    void ask();
  });
  askStop.addEventListener("click", () => asking?.abort());
  on("indices", (detail) => populateAskIndex(detail?.select));
  on("ask-index", (name) => {
    populateAskIndex(name);
    showTab("ask");
    $("#question").focus();
  });
}
