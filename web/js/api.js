// @ts-check
// The connection: API key, tenant, and calls to either app (JSON and server-sent events).
import { $ } from "./dom.js";
import { config } from "./state.js";

export const KEY_STORAGE = "lectern.apiKey";
export const TENANT_STORAGE = "lectern.tenant";

/**
 * Whether `name` is a valid index name or tenant id, by the app's own pattern (config.json); before
 * that is read, any name (the app checks it anyway).
 * @param {string} name
 */
export function isValidName(name) {
  return config.name_pattern ? new RegExp(config.name_pattern).test(name) : name !== "";
}

/** @param {string} key */
export function readStorage(key) {
  try {
    return localStorage.getItem(key) ?? "";
  } catch {
    return "";
  }
}

/**
 * @param {string} key
 * @param {string} value
 */
export function writeStorage(key, value) {
  try {
    if (value) localStorage.setItem(key, value);
    else localStorage.removeItem(key);
  } catch {
    // Storage may be disabled (private mode); the field still works for this page.
  }
}

export function apiKey() {
  return $("#api-key").value.trim();
}

export function tenant() {
  const value = $("#tenant").value.trim();
  return isValidName(value) ? value : "";
}

/** @param {string} [prefix] */
export function tenantQuery(prefix = "?") {
  return tenant() ? `${prefix}tenant_id=${encodeURIComponent(tenant())}` : "";
}

/**
 * @param {Record<string, string>} [extra]
 * @returns {Record<string, string>}
 */
export function authHeaders(extra = {}) {
  /** @type {Record<string, string>} */
  const headers = { ...extra };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  return headers;
}

export class ApiError extends Error {
  /**
   * @param {string} message
   * @param {number} status
   */
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

/**
 * The message of an error body in the contract's shape, OpenAI's, or whatever the text says.
 * @param {number} status
 * @param {string} text
 */
export function errorMessage(status, text) {
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

/** @param {Response} response */
export async function failure(response) {
  const text = await response.text().catch(() => "");
  return new ApiError(errorMessage(response.status, text), response.status);
}

/**
 * @param {string} base
 * @param {string} path
 * @param {{ method?: string, body?: unknown, signal?: AbortSignal }} [options]
 */
export async function requestJson(base, path, { method = "GET", body, signal } = {}) {
  let response;
  try {
    response = await fetch(`${base}${path}`, {
      method,
      headers: authHeaders(body === undefined ? {} : { "content-type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (/** @type {any} */ (error)?.name === "AbortError") throw error;
    throw new ApiError(`Cannot reach ${base || window.location.origin}: ${errorText(error)}`, 0);
  }
  if (!response.ok) throw await failure(response);
  return response.json();
}

/**
 * POSTs JSON and returns the response when it is a 2xx; `what` names the app in a network error.
 * @param {string} url
 * @param {unknown} body
 * @param {AbortSignal} signal
 * @param {string} what
 * @param {Record<string, string>} [headers]
 */
export async function postJson(url, body, signal, what, headers = {}) {
  let response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: authHeaders({ "content-type": "application/json", ...headers }),
      body: JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (/** @type {any} */ (error)?.name === "AbortError") throw error;
    throw new ApiError(`Cannot reach ${what}: ${errorText(error)}`, 0);
  }
  if (!response.ok) throw await failure(response);
  return response;
}

/** @param {unknown} error */
export function errorText(error) {
  return /** @type {any} */ (error)?.message ?? String(error);
}

/** @param {Response} response */
export function isEventStream(response) {
  return (response.headers.get("content-type") ?? "").includes("text/event-stream");
}

/**
 * Reads a text/event-stream body, calling onEvent(name, data) per event; data is parsed JSON when it
 * parses. Handles events split across network chunks, CRLF line ends and multi-line data.
 * @param {Response} response
 * @param {(name: string, data: any) => void} onEvent
 */
export async function readEvents(response, onEvent) {
  if (!response.body) return;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  /** @param {string} block */
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
      // Not JSON (e.g. OpenAI's "[DONE]"): hand the text over as it is.
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
