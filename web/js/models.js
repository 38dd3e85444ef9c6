// @ts-check
// The text generation app's models (GET /v1/models), for the model pickers of Generate and Chat and
// the bound of their length fields: `max_model_len` is the tokens one request may hold, prompt and
// answer together, so asking for more new tokens than that can never succeed.
import { authHeaders, failure } from "./api.js";
import { el } from "./dom.js";
import { config, shared } from "./state.js";

/** @typedef {{ id: string, status?: string, role?: string, roles?: string[], default?: boolean, max_model_len?: number | null }} ModelInfo */

/** @type {ModelInfo[]} */
let models = [];
/** @type {Promise<ModelInfo[]> | null} */
let loading = null;

/** Reads the list again (a model may have loaded since); concurrent callers share one request. */
export function loadModels() {
  if (!shared.configLoaded) return Promise.resolve(models);
  loading ??= fetch(`${config.textgen_url}/v1/models`, { headers: authHeaders() })
    .then(async (response) => {
      if (!response.ok) throw await failure(response);
      const body = await response.json();
      models = Array.isArray(body.data) ? body.data : [];
      return models;
    })
    .catch(() => models)
    .finally(() => {
      loading = null;
    });
  return loading;
}

/**
 * Tokens one request to `id` may hold (the default model when `id` is empty); undefined while the
 * server does not say (the model is not loaded yet, or an older server).
 * @param {string} id
 */
export function contextOf(id) {
  const model = models.find((candidate) => (id ? candidate.id === id : candidate.default)) ?? models[0];
  const tokens = model?.max_model_len;
  return typeof tokens === "number" && tokens > 0 ? tokens : undefined;
}

/**
 * Fills a picker with the models that can generate, keeping its choice where it is still listed.
 * @param {HTMLSelectElement} select
 */
export function fillModelPicker(select) {
  const current = select.value;
  const generating = models.filter((model) =>
    (model.roles ?? [model.role ?? "generate"]).includes("generate"),
  );
  if (generating.length === 0) {
    select.replaceChildren(el("option", { value: "", text: "the server's model" }));
    return;
  }
  select.replaceChildren(
    ...generating.map((model) => {
      const state = typeof model.status === "string" && model.status !== "loaded" ? ` (${model.status})` : "";
      return el("option", {
        value: model.id,
        text: `${model.id}${state}`,
        disabled: model.status === "failed",
      });
    }),
  );
  const preferred =
    generating.find((model) => model.id === current) ?? generating.find((model) => model.default);
  if (preferred) select.value = preferred.id;
}

/**
 * Bounds a "new tokens" field by the model's context: its `max` (so the browser's own check and the
 * spin buttons stop there) and a hint saying why. A prompt takes at least one token.
 * @param {HTMLInputElement} input
 * @param {HTMLElement} hint
 * @param {string} model
 */
export function boundNewTokens(input, hint, model) {
  const context = contextOf(model);
  if (context === undefined) {
    input.removeAttribute("max");
    hint.textContent = "";
    return;
  }
  input.max = String(context - 1);
  hint.textContent = `At most ${context - 1}: the model holds ${context} tokens per request, prompt included.`;
}

/**
 * The field's value checked against its bound: an error message naming the field, or null.
 * @param {HTMLInputElement} input
 * @param {string} label
 * @param {string} model
 */
export function newTokensProblem(input, label, model) {
  const value = Number(input.value);
  if (input.value.trim() === "") return null;
  if (!Number.isInteger(value) || value < 1) return `${label} must be a whole number of at least 1.`;
  const context = contextOf(model);
  if (context !== undefined && value > context - 1)
    return `${label} can be at most ${context - 1}: the model holds ${context} tokens per request, prompt included.`;
  return null;
}
