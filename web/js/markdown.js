// @ts-check
// A small Markdown renderer that builds DOM nodes, for text a model wrote. Model output is untrusted:
// no string is ever parsed as HTML (nodes are built one by one), so a "<script>" in an answer stays
// text, and links are kept only for http(s) URLs. Written here rather than taken from npm because the
// playground is served as plain files with no bundler: the well-kept renderers (marked, markdown-it)
// produce an HTML string that then needs a sanitizer (DOMPurify) to be safe, two dependencies for
// what this covers: paragraphs, headings, fenced code, inline code, emphasis, lists, links and [n]
// citations.

/**
 * @typedef {object} RenderOptions
 * @property {(numbers: number[]) => (Node | null)} [cite] a node for a citation [n] or [n, m], or
 *   null to leave the text as it is
 */

const FENCE = /^\s{0,3}(```|~~~)\s*([\w+-]*)\s*$/;
const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;

/**
 * Renders Markdown into `target`, replacing what it held.
 * @param {HTMLElement} target
 * @param {string} text
 * @param {RenderOptions} [options]
 */
export function renderMarkdown(target, text, options = {}) {
  target.replaceChildren(...markdownNodes(text, options));
}

/**
 * @param {string} text
 * @param {RenderOptions} [options]
 * @returns {Node[]}
 */
export function markdownNodes(text, options = {}) {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  /** @type {Node[]} */
  const blocks = [];
  /** @type {string[]} */
  let paragraph = [];
  const flushParagraph = () => {
    if (paragraph.length === 0) return;
    const p = document.createElement("p");
    p.append(...inlineNodes(paragraph.join("\n"), options));
    blocks.push(p);
    paragraph = [];
  };
  for (let i = 0; i < lines.length;) {
    const line = /** @type {string} */ (lines[i]);
    const fence = FENCE.exec(line);
    if (fence) {
      flushParagraph();
      const code = [];
      i++;
      // An unclosed fence (still streaming) runs to the end of the text.
      while (i < lines.length && !new RegExp(`^\\s{0,3}${fence[1]}\\s*$`).test(lines[i] ?? "")) {
        code.push(lines[i]);
        i++;
      }
      i++;
      blocks.push(codeBlock(code.join("\n"), fence[2] ?? ""));
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      flushParagraph();
      // Model headings sit inside a message: h4 and below, so they never outrank the page's own.
      const level = Math.min(6, 3 + (heading[1]?.length ?? 1));
      const h = document.createElement(`h${level}`);
      h.append(...inlineNodes(heading[2] ?? "", options));
      blocks.push(h);
      i++;
      continue;
    }
    if (BULLET.test(line) || NUMBERED.test(line)) {
      flushParagraph();
      i = list(lines, i, blocks, options);
      continue;
    }
    if (line.trim() === "") flushParagraph();
    else paragraph.push(line);
    i++;
  }
  flushParagraph();
  return blocks;
}

/**
 * @param {string} code
 * @param {string} language
 */
function codeBlock(code, language) {
  const pre = document.createElement("pre");
  const node = document.createElement("code");
  if (language) node.dataset.language = language;
  node.textContent = code;
  pre.append(node);
  return pre;
}

/**
 * Reads one list (bulleted or numbered, by its first item) from lines[start]; returns the next line.
 * Lines indented under an item continue it.
 * @param {string[]} lines
 * @param {number} start
 * @param {Node[]} blocks
 * @param {RenderOptions} options
 */
function list(lines, start, blocks, options) {
  const first = lines[start] ?? "";
  const numbered = NUMBERED.exec(first);
  const pattern = numbered ? NUMBERED : BULLET;
  const node = document.createElement(numbered ? "ol" : "ul");
  if (numbered && numbered[1] !== "1") node.setAttribute("start", String(Number(numbered[1])));
  let i = start;
  while (i < lines.length) {
    const match = pattern.exec(lines[i] ?? "");
    if (!match) break;
    const itemLines = [numbered ? (match[2] ?? "") : (match[1] ?? "")];
    i++;
    while (i < lines.length && /^\s{2,}\S/.test(lines[i] ?? "") && !pattern.test(lines[i] ?? "")) {
      itemLines.push((lines[i] ?? "").trim());
      i++;
    }
    const item = document.createElement("li");
    item.append(...inlineNodes(itemLines.join("\n"), options));
    node.append(item);
  }
  blocks.push(node);
  return i;
}

// Inline: `code`, **strong**, *em* or _em_, [text](http(s) URL), [n] citations. The first match
// wins, left to right; what matches nothing is text.
const INLINE = new RegExp(
  [
    "`([^`\\n]+)`",
    "\\*\\*([^*\\n](?:[^\\n]*?[^*\\n])?)\\*\\*",
    "\\*([^*\\s](?:[^*\\n]*?[^*\\s])?)\\*",
    "(?<![\\p{L}\\p{N}])_([^_\\s](?:[^_\\n]*?[^_\\s])?)_(?![\\p{L}\\p{N}])",
    "\\[([^\\]\\n]+)\\]\\(([^)\\s]+)\\)",
    "\\[(\\d+(?:\\s*[,;]\\s*\\d+)*)\\]",
  ].join("|"),
  "gu",
);

/**
 * @param {string} text
 * @param {RenderOptions} options
 * @returns {Node[]}
 */
export function inlineNodes(text, options = {}) {
  /** @type {Node[]} */
  const nodes = [];
  let last = 0;
  /** @param {string} piece */
  const pushText = (piece) => {
    if (!piece) return;
    // A single newline inside a paragraph is a line break, as chat users expect.
    piece.split("\n").forEach((part, index) => {
      if (index > 0) nodes.push(document.createElement("br"));
      if (part) nodes.push(document.createTextNode(part));
    });
  };
  for (const match of text.matchAll(INLINE)) {
    const at = match.index ?? 0;
    const [whole, code, strong, em, emUnderscore, linkText, href, citation] = match;
    /** @type {Node | null} */
    let node = null;
    if (code !== undefined) {
      node = document.createElement("code");
      node.textContent = code;
    } else if (strong !== undefined) {
      node = wrap("strong", inlineNodes(strong, options));
    } else if (em !== undefined || emUnderscore !== undefined) {
      node = wrap("em", inlineNodes(em ?? emUnderscore ?? "", options));
    } else if (linkText !== undefined && href !== undefined) {
      node = safeLink(linkText, href, options);
    } else if (citation !== undefined && options.cite) {
      node = options.cite(citation.split(/[,;]/).map((part) => Number(part.trim())));
    }
    if (!node) continue;
    pushText(text.slice(last, at));
    nodes.push(node);
    last = at + whole.length;
  }
  pushText(text.slice(last));
  return nodes;
}

/**
 * @param {string} tag
 * @param {Node[]} children
 */
function wrap(tag, children) {
  const node = document.createElement(tag);
  node.append(...children);
  return node;
}

/**
 * A link only for an absolute http(s) URL; anything else (javascript:, data:, relative) is no link.
 * @param {string} text
 * @param {string} href
 * @param {RenderOptions} options
 * @returns {Node | null}
 */
function safeLink(text, href, options) {
  let url;
  try {
    url = new URL(href);
  } catch {
    return null;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return null;
  const a = document.createElement("a");
  a.href = url.href;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  a.append(...inlineNodes(text, options));
  return a;
}
