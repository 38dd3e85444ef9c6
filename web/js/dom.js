// @ts-check
// Small DOM and formatting helpers shared by every panel.

/**
 * The first element matching `selector` (typed loosely: the panels know what their ids are).
 * @param {string} selector
 * @param {ParentNode} [root]
 * @returns {any}
 */
export const $ = (selector, root = document) => root.querySelector(selector);

/**
 * An element with attributes (`className`, `text`, `on<event>` handlers, the rest as attributes) and
 * children. Text always goes in as text nodes, never as HTML.
 * @param {string} tag
 * @param {Record<string, any>} [attributes]
 * @param {...(Node | string | null | undefined)} children
 * @returns {any}
 */
export function el(tag, attributes = {}, ...children) {
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

/** @param {number} bytes */
export function formatBytes(bytes) {
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

/** @param {number} ms */
export function formatMs(ms) {
  if (!Number.isFinite(ms)) return "–";
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

const numberFormat = new Intl.NumberFormat();
/** @param {number} n */
export const formatCount = (n) => (Number.isFinite(n) ? numberFormat.format(n) : "–");

/**
 * A count with its noun, singular for one: "1 doc", "3 docs" (the plural is the noun plus "s" unless
 * given).
 * @param {number} n
 * @param {string} noun
 * @param {string} [plural]
 */
export const formatCountOf = (n, noun, plural = `${noun}s`) => `${formatCount(n)} ${n === 1 ? noun : plural}`;

/** @param {string} iso */
export function formatWhen(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso ?? "–";
  const seconds = Math.round((Date.now() - date.getTime()) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return date.toLocaleDateString();
}

/**
 * @param {HTMLElement} node
 * @param {string} message
 * @param {string} [kind] "ok", "error" or "" (plain)
 */
export function setStatus(node, message, kind = "") {
  node.textContent = message;
  if (kind) node.dataset.kind = kind;
  else delete node.dataset.kind;
}

/**
 * Enables one of a start/stop pair of buttons and keeps keyboard focus on the enabled one, so a
 * button that becomes disabled under the focus does not drop the focus to the page.
 * @param {HTMLButtonElement} startButton
 * @param {HTMLButtonElement} stopButton
 * @param {boolean} running
 */
export function toggleRunning(startButton, stopButton, running) {
  const focused = document.activeElement;
  startButton.disabled = running;
  stopButton.disabled = !running;
  if (running && focused === startButton) stopButton.focus();
  else if (!running && (focused === stopButton || focused === document.body)) startButton.focus();
}

export function prefersReducedMotion() {
  return window.matchMedia("(prefers-reduced-motion: reduce)").matches;
}

/**
 * The number in an input box, undefined when empty; throws an error naming the box when it is not one.
 * @param {HTMLInputElement} input
 * @param {boolean} [integer]
 */
export function optionalNumber(input, integer = false) {
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

/**
 * The element matching `selector`; throws naming it when the page has none (a page out of step).
 * @param {string} selector
 * @returns {any}
 */
export function requireElement(selector) {
  const node = document.querySelector(selector);
  if (!node) throw new Error(`The page has no ${selector}`);
  return node;
}
