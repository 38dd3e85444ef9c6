/** Document titles: labels, kept short. */

/** The most characters a title keeps (its full text stays in the document's text). */
export const MAX_TITLE_CHARS = 256;

/**
 * A title is a label, and the engine indexes it with every chunk of its document: a 150 KB heading
 * would be indexed once per chunk (150 chunks: 22 MB). Past MAX_TITLE_CHARS it is cut at the last
 * space before the limit (or at the limit, never inside a surrogate pair) and ends with "…".
 */
export function shortTitle(title: string): string {
  if (title.length <= MAX_TITLE_CHARS) return title;
  let cut = title.lastIndexOf(" ", MAX_TITLE_CHARS - 1);
  if (cut < MAX_TITLE_CHARS / 2) cut = MAX_TITLE_CHARS - 1;
  const code = title.charCodeAt(cut - 1);
  if (code >= 0xd800 && code <= 0xdbff) cut--;
  return `${title.slice(0, cut).trimEnd()}…`;
}
