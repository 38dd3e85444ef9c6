// @ts-check
// Indices: build one from files (upload progress), list them, delete one.
import { apiKey, errorMessage, isValidName, requestJson, tenant, tenantQuery } from "./api.js";
import { $, el, formatBytes, formatCount, formatCountOf, formatMs, formatWhen, setStatus } from "./dom.js";
import { config, emit, on, shared } from "./state.js";

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

let chosenFiles = [];
let upload = null;

/**
 * Whether the RAG app reads a file of this name (its formats, from its config.json); before they
 * are known, every file is taken and the app says which it cannot read.
 * @param {string} name
 */
function isSupported(name) {
  const dot = name.lastIndexOf(".");
  return config.formats.length === 0 || (dot > 0 && config.formats.includes(name.slice(dot).toLowerCase()));
}

/**
 * The formats the RAG app reads, from its /ui/config.json (this page's own when the RAG app serves
 * it): the file chooser offers them and the hint lists them.
 */
export async function loadFormats() {
  if (config.formats.length === 0 && config.service !== "rag") {
    try {
      const response = await fetch(`${config.rag_url}/ui/config.json`, { cache: "no-store" });
      if (response.ok) config.formats = (await response.json()).formats ?? [];
    } catch {
      // The RAG app is not reachable: files are taken as they come, and it says which it cannot read.
    }
  }
  if (config.formats.length === 0) return;
  fileInput.accept = config.formats.join(",");
  $("#files-hint").textContent = config.formats.join(" ");
}

function fileKey(file) {
  return `${file.name}\u0000${file.size}\u0000${file.lastModified}`;
}

function addFiles(files) {
  const skipped = [];
  const known = new Set(chosenFiles.map(fileKey));
  for (const file of files) {
    if (!isSupported(file.name)) {
      skipped.push(file.name);
      continue;
    }
    if (known.has(fileKey(file))) continue;
    known.add(fileKey(file));
    chosenFiles.push(file);
  }
  if (!indexNameInput.value && chosenFiles.length > 0) {
    // Characters a name may not hold (by the app's rule) become "-".
    const base = chosenFiles[0].name.replace(/\.[^.]+$/, "");
    const stem = [...base]
      .map((char) => (isValidName(`a${char}`) ? char : "-"))
      .join("")
      .replace(/-{2,}/g, "-");
    const name = stem.replace(/^[-.]+|[-.]+$/g, "").slice(0, 64);
    if (isValidName(name)) indexNameInput.value = name;
  }
  renderFiles();
  if (skipped.length > 0) {
    setStatus(
      buildStatus,
      `Skipped ${skipped.join(", ")}: only ${config.formats.join(" ")} are indexed.`,
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
  if (!isValidName(name)) {
    setStatus(
      buildStatus,
      `Give the index a name: ${config.name_rule || "letters, digits, . _ -"}.`,
      "error",
    );
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
        `Built “${body.index_name ?? name}”: ${formatCountOf(body.documents_count, "document")}, ${formatCountOf(body.chunks_count, "chunk")}, ${formatCountOf(body.vocabulary_size, "term")} in ${formatMs(body.build_ms ?? performance.now() - started)}.`,
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

let refreshing = null;
export async function refreshIndices(options = {}) {
  // Not before config.json has said where the RAG app is.
  if (!shared.configLoaded) return;
  // Coalesce: a refresh already under way is followed by one more, not by many.
  if (refreshing) {
    await refreshing;
  }
  refreshing = (async () => {
    try {
      const body = await requestJson(config.rag_url, `/rag/indices${tenantQuery()}`);
      shared.indices = body.indices ?? [];
      renderIndices(options.highlight);
      setStatus(indicesStatus, "");
      emit("indices", { select: options.select });
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
    ...shared.indices.map((index) => {
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
              onclick: () => emit("ask-index", index.name),
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
  indicesTable.hidden = shared.indices.length === 0;
  indicesEmpty.hidden = shared.indices.length !== 0;
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

export function mountIndices() {
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

  buildForm.addEventListener("submit", (event) => {
    event.preventDefault();
    buildIndex();
  });
  buildCancel.addEventListener("click", () => upload?.abort());

  $("#indices-refresh").addEventListener("click", () => void refreshIndices());
  // Listing or asking shows the indices as they are now.
  on("tab", (name) => {
    if (name === "indices" || name === "ask" || name === "chat") void refreshIndices();
  });
}
