/**
 * Real documents made by the tests themselves: a multi-page PDF and a DOCX written byte by byte, so
 * the ingestion tests need no binary fixtures in the repo and no tool to make them.
 */
import { crc32, deflateSync } from "node:zlib";
import { pdfStream, writePdf, type PdfObject } from "./pdf-writer.js";

/** A PDF with one page per entry of `pages` (each a list of text lines), Helvetica 12 pt. */
export function makePdf(pages: string[][]): Buffer {
  const objects: PdfObject[] = [];
  const add = (body: PdfObject) => objects.push(body); // object numbers start at 1
  const escape = (text: string) => text.replace(/[\\()]/g, (c) => `\\${c}`);
  const catalog = add("<< /Type /Catalog /Pages 2 0 R >>");
  const pagesIndex = add(""); // filled below, once the page objects exist
  const font = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
  const pageIds: number[] = [];
  for (const lines of pages) {
    const stream = [
      "BT",
      "/F1 12 Tf",
      "72 720 Td",
      "14 TL",
      ...lines.map((line) => `(${escape(line)}) '`),
      "ET",
    ].join("\n");
    const content = add(pdfStream(Buffer.from(stream, "latin1")));
    pageIds.push(
      add(
        `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 ${font} 0 R >> >> /Contents ${content} 0 R >>`,
      ),
    );
  }
  objects[pagesIndex - 1] =
    `<< /Type /Pages /Kids [${pageIds.map((id) => `${id} 0 R`).join(" ")}] /Count ${pageIds.length} >>`;
  return writePdf(objects, catalog);
}

/** An 8-bit gray image, one byte a pixel, rows top to bottom. */
export interface GrayImage {
  width: number;
  height: number;
  pixels: Buffer;
}

/**
 * A PDF with no text layer: one page per image, each image filling its page (a scan): a Letter page,
 * or with `dpi` a page of the image's size at that resolution. The pixels are stored as a
 * Flate-compressed image XObject.
 */
export function makeImagePdf(images: readonly GrayImage[], dpi?: number): Buffer {
  const objects: PdfObject[] = [];
  const add = (body: PdfObject) => objects.push(body);
  const catalog = add("<< /Type /Catalog /Pages 2 0 R >>");
  const pagesIndex = add("");
  const pageIds: number[] = [];
  for (const { width, height, pixels } of images) {
    const [pageWidth, pageHeight] = dpi ? [(width * 72) / dpi, (height * 72) / dpi] : [612, 792];
    const image = add(
      pdfStream(
        deflateSync(pixels),
        `/Type /XObject /Subtype /Image /Width ${width} /Height ${height} /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode`,
      ),
    );
    const content = add(
      pdfStream(Buffer.from(`q ${pageWidth} 0 0 ${pageHeight} 0 0 cm /Im1 Do Q`, "latin1")),
    );
    pageIds.push(
      add(
        `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 ${pageWidth} ${pageHeight}] /Resources << /XObject << /Im1 ${image} 0 R >> >> /Contents ${content} 0 R >>`,
      ),
    );
  }
  objects[pagesIndex - 1] =
    `<< /Type /Pages /Kids [${pageIds.map((id) => `${id} 0 R`).join(" ")}] /Count ${pageIds.length} >>`;
  return writePdf(objects, catalog);
}

/** A binary PGM (P5, maxval 255) read into its pixels. */
export function readPgm(bytes: Buffer): GrayImage {
  // Header: "P5", width, height, maxval, separated by whitespace, then one whitespace byte.
  const fields: string[] = [];
  let at = 0;
  while (fields.length < 4) {
    while (/\s/.test(String.fromCharCode(bytes[at]!))) at++;
    const from = at;
    while (!/\s/.test(String.fromCharCode(bytes[at]!))) at++;
    fields.push(bytes.toString("latin1", from, at));
  }
  const [magic, width, height, maxval] = fields;
  if (magic !== "P5" || maxval !== "255") throw new Error(`not an 8-bit binary PGM: ${fields.join(" ")}`);
  const w = Number(width);
  const h = Number(height);
  return { width: w, height: h, pixels: bytes.subarray(at + 1, at + 1 + w * h) };
}

/** A ZIP archive of stored (uncompressed) entries. */
function makeZip(entries: Array<[string, string]>): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, content] of entries) {
    const data = Buffer.from(content, "utf8");
    const nameBytes = Buffer.from(name, "utf8");
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(nameBytes.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(nameBytes.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, nameBytes, data);
    centrals.push(central, nameBytes);
    offset += local.length + nameBytes.length + data.length;
  }
  const centralSize = centrals.reduce((sum, b) => sum + b.length, 0);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(centralSize, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, ...centrals, end]);
}

/** A minimal Word document with one paragraph per entry. */
export function makeDocx(paragraphs: string[]): Buffer {
  const escape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  return makeDocxFromBody(
    paragraphs.map((p) => `<w:p><w:r><w:t xml:space="preserve">${escape(p)}</w:t></w:r></w:p>`).join(""),
  );
}

/**
 * A minimal Word document whose <w:body> holds `body`, WordprocessingML as given, and with `styles`
 * a styles part (word/styles.xml) whose <w:styles> holds them.
 */
export function makeDocxFromBody(body: string, styles?: string): Buffer {
  const stylesPart: Array<[string, string]> = styles
    ? [
        [
          "word/styles.xml",
          `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">${styles}</w:styles>`,
        ],
      ]
    : [];
  return makeZip([
    ...stylesPart,
    [
      "[Content_Types].xml",
      '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
    ],
    [
      "_rels/.rels",
      '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
    ],
    [
      "word/document.xml",
      `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${body}</w:body></w:document>`,
    ],
  ]);
}
