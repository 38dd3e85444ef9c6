// @ts-check
// Lectern playground: plain ES modules, no dependencies, no build step. One page drives both apps;
// /ui/config.json says where each one is. Each panel mounts itself; they share only state.js.
import {
  KEY_STORAGE,
  TENANT_STORAGE,
  apiKey,
  isValidName,
  readStorage,
  tenant,
  writeStorage,
} from "./api.js";
import { mountAsk } from "./ask.js";
import { mountChat } from "./chat.js";
import { $ } from "./dom.js";
import { mountGenerate } from "./generate.js";
import { loadFormats, mountIndices, refreshIndices } from "./indices.js";
import { checkRag, checkTextgen } from "./services.js";
import { config, running, shared } from "./state.js";
import { mountTabs } from "./tabs.js";

async function loadConfig() {
  try {
    const response = await fetch("config.json", { cache: "no-store" });
    if (response.ok) Object.assign(config, await response.json());
  } catch {
    // Opened from elsewhere: assume both APIs are on this origin.
  }
}

/** The tenant and index name fields say, as the browser shows invalid fields, when a name breaks the app's rule. */
function checkNames() {
  for (const input of [$("#tenant"), $("#index-name")]) {
    const check = () => {
      const value = input.value.trim();
      input.setCustomValidity(value === "" || isValidName(value) ? "" : `Use ${config.name_rule}.`);
    };
    input.addEventListener("input", check);
    check();
  }
}

function applyAuth() {
  const apiKeyInput = $("#api-key");
  const needsKey = config.auth && !apiKey();
  $("#auth-banner").hidden = !needsKey;
  $("#connection").classList.toggle("needs-key", config.auth);
  apiKeyInput.placeholder = config.auth ? "required" : "optional";
  apiKeyInput.required = config.auth;
}

function mountConnection() {
  const apiKeyInput = $("#api-key");
  const tenantInput = $("#tenant");
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
  $("#connection").addEventListener("submit", (/** @type {Event} */ event) => event.preventDefault());
  const keyToggle = $("#api-key-toggle");
  keyToggle.addEventListener("click", () => {
    const show = apiKeyInput.type === "password";
    apiKeyInput.type = show ? "text" : "password";
    keyToggle.textContent = show ? "Hide" : "Show";
    keyToggle.setAttribute("aria-pressed", String(show));
  });
}

async function main() {
  mountConnection();
  mountGenerate();
  mountIndices();
  mountAsk();
  mountChat();
  // Escape stops whatever is streaming.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    for (const controller of running) controller.abort();
  });
  mountTabs();

  await loadConfig();
  shared.configLoaded = true;
  applyAuth();
  checkNames();
  $("#footer-service").textContent =
    config.service === "rag"
      ? "Served by the RAG app."
      : config.service
        ? "Served by the text generation app."
        : "";
  if (config.auth && !apiKey()) $("#api-key").focus();
  await Promise.all([checkTextgen(), checkRag(), refreshIndices(), loadFormats()]);
  document.body.dataset.ready = "true";
}

void main();
