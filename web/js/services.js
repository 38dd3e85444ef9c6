// @ts-check
// The status of both apps in the header.
import { $ } from "./dom.js";
import { config, emit, shared } from "./state.js";

/**
 * @param {string} id
 * @param {string} state
 * @param {string} detail
 */
function showService(id, state, detail) {
  const item = /** @type {HTMLElement} */ (document.getElementById(id));
  item.dataset.state = state;
  $(".service-detail", item).textContent = detail;
}

export async function checkTextgen() {
  try {
    const response = await fetch(`${config.textgen_url}/health`);
    const body = await response.json().catch(() => ({}));
    if (response.ok) {
      showService("svc-textgen", "ok", body.model_name ?? "ready");
      shared.modelName = body.model_name ?? "";
      emit("textgen-ready");
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

export async function checkRag() {
  try {
    const response = await fetch(`${config.rag_url}/health`);
    const body = await response.json().catch(() => ({}));
    if (response.ok) showService("svc-rag", "ok", body.storage ? `ready (${body.storage})` : "ready");
    else showService("svc-rag", "down", `HTTP ${response.status}`);
  } catch {
    showService("svc-rag", "down", "not reachable");
  }
}
