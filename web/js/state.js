// @ts-check
// The state the panels share, and the events they tell each other by. Each panel keeps its own state.

/**
 * Where each app is (an empty URL means this page's own origin), from /ui/config.json, and the rules
 * the page checks before sending: the name pattern of indices and tenants, and (from the RAG app's
 * config.json) the file formats it reads. The page keeps no copy of either.
 * @type {{ service: string, textgen_url: string, rag_url: string, auth: boolean, name_pattern: string, name_rule: string, formats: string[] }}
 */
export const config = {
  service: "",
  textgen_url: "",
  rag_url: "",
  auth: false,
  name_pattern: "",
  name_rule: "",
  formats: [],
};

export const shared = {
  /** Whether config.json has been read (no call to the RAG app before it has). */
  configLoaded: false,
  /** The text generation app's model, from /health. */
  modelName: "",
  /** The tenant's indices, as /rag/indices lists them. @type {Array<Record<string, any>>} */
  indices: [],
};

/**
 * Events between panels: "indices" (the list changed; detail: { select?: string }), "ask-index"
 * (detail: an index name to ask), "tab" (detail: the name of the tab shown), "escape".
 */
export const bus = new EventTarget();

/**
 * @param {string} name
 * @param {unknown} [detail]
 */
export function emit(name, detail) {
  bus.dispatchEvent(new CustomEvent(name, { detail }));
}

/**
 * @param {string} name
 * @param {(detail: any) => void} listener
 */
export function on(name, listener) {
  bus.addEventListener(name, (event) => listener(/** @type {CustomEvent} */ (event).detail));
}

/** The requests now streaming, each with its stop; Escape stops the first one started. */
export const running = new Set();
