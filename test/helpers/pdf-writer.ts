/**
 * The one PDF writer of the test fixtures: numbered objects, the cross-reference table and the
 * trailer. The fixtures choose the objects (doc-fixtures.ts a real document, bomb-fixtures.ts and
 * reliability/hostile-fixtures.ts hostile streams); this only lays them out with correct offsets.
 */

/** An object's body: text (written as Latin-1), or pieces written as given (a stream's raw bytes). */
export type PdfObject = string | readonly (string | Buffer)[];

/** A PDF of `objects`, numbered from 1 in order; `root` is the catalog's number. */
export function writePdf(objects: readonly PdfObject[], root = 1): Buffer {
  const parts: Buffer[] = [];
  const offsets: number[] = [];
  let length = 0;
  const push = (piece: Buffer | string) => {
    const bytes = typeof piece === "string" ? Buffer.from(piece, "latin1") : piece;
    parts.push(bytes);
    length += bytes.length;
  };
  push("%PDF-1.4\n");
  for (const body of objects) {
    offsets.push(length);
    push(`${offsets.length} 0 obj\n`);
    for (const piece of typeof body === "string" ? [body] : body) push(piece);
    push("\nendobj\n");
  }
  const xref = length;
  push(`xref\n0 ${offsets.length + 1}\n0000000000 65535 f \n`);
  for (const offset of offsets) push(`${String(offset).padStart(10, "0")} 00000 n \n`);
  push(`trailer\n<< /Size ${offsets.length + 1} /Root ${root} 0 R >>\nstartxref\n${xref}\n%%EOF\n`);
  return Buffer.concat(parts);
}

/** A stream object: `data` exactly as given after `keyword` ("stream" and its end of line). */
export function pdfStream(data: Buffer, dictionary = "", keyword = "stream\n"): PdfObject {
  return [
    `<< /Length ${data.length}${dictionary ? ` ${dictionary}` : ""} >>\n${keyword}`,
    data,
    "\nendstream",
  ];
}

/**
 * One page in Helvetica whose content is `content` (object 4); the page tree lists `kids` and
 * claims `count` pages, which a hostile file may set to anything.
 */
export function onePagePdf(content: PdfObject, pages: { kids?: string; count?: number } = {}): Buffer {
  return writePdf([
    "<< /Type /Catalog /Pages 2 0 R >>",
    `<< /Type /Pages /Kids [${pages.kids ?? "3 0 R"}] /Count ${pages.count ?? 1} >>`,
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
    content,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  ]);
}
