/**
 * The one mapping between the pages of a paged document (PDF) and its text: page texts are joined
 * into the document's text with a blank line between pages, `pageStarts[n - 1]` is where page n
 * starts, and a span of the text (a chunk) covers the pages from the one holding its first character
 * to the one holding its last. Loaders produce the page texts (pdf.js's text today; an OCR pass or
 * per-page character offsets can build on the same `pageStarts`), the service gives chunks their
 * provenance from it.
 */

export interface PagedText {
  text: string;
  /** Where each page starts in `text` (page n starts at pageStarts[n - 1]). */
  pageStarts: number[];
}

/** Joins page texts, each trimmed, with a blank line between pages. */
export function joinPages(pages: readonly string[]): PagedText {
  const pageStarts: number[] = [];
  const parts: string[] = [];
  let length = 0;
  pages.forEach((page, index) => {
    if (index > 0) {
      parts.push("\n\n");
      length += 2;
    }
    pageStarts.push(length);
    const text = page.trim();
    parts.push(text);
    length += text.length;
  });
  return { text: parts.join(""), pageStarts };
}

/** The 1-based page of a character offset, given where each page starts. */
export function pageAt(pageStarts: readonly number[], offset: number): number {
  let low = 0;
  let high = pageStarts.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (pageStarts[mid]! <= offset) low = mid;
    else high = mid - 1;
  }
  return low + 1;
}

/** Where a span [start, end) of the text lies: `page` its first page, `pages` every page it covers. */
export function pagesOfSpan(
  pageStarts: readonly number[],
  start: number,
  end: number,
): { page: number; pages: number[] } {
  const first = pageAt(pageStarts, start);
  const last = pageAt(pageStarts, Math.max(start, end - 1));
  return { page: first, pages: Array.from({ length: last - first + 1 }, (_, i) => first + i) };
}
