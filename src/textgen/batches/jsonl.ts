/**
 * Reading a batch's input file: lines streamed from disk in the file's chunks, each bounded by
 * BATCH_MAX_LINE_BYTES (a longer line is reported as such, its bytes never gathered), so neither a
 * huge file nor a line without end holds memory or the event loop: the work between two awaits is
 * one chunk (64 KiB) and one line's JSON.parse, at most BATCH_MAX_LINE_BYTES.
 */
import fs from "node:fs";

export interface FileLine {
  /** 1-based line number in the file: the line's key in the batch's progress. */
  number: number;
  /** The line's text (a trailing \r removed); null when it is longer than the bound. */
  text: string | null;
}

const NEWLINE = 10;

export async function* fileLines(file: string, maxLineBytes: number): AsyncGenerator<FileLine> {
  let parts: Buffer[] = [];
  let size = 0;
  let tooLong = false;
  let number = 0;
  const take = (): FileLine => {
    number++;
    const line = { number, text: tooLong ? null : Buffer.concat(parts).toString("utf8").replace(/\r$/, "") };
    parts = [];
    size = 0;
    tooLong = false;
    return line;
  };
  for await (const chunk of fs.createReadStream(file) as AsyncIterable<Buffer>) {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(NEWLINE, start);
      const end = newline === -1 ? chunk.length : newline;
      if (!tooLong && size + (end - start) > maxLineBytes) {
        tooLong = true;
        parts = [];
      } else if (!tooLong) {
        parts.push(chunk.subarray(start, end));
        size += end - start;
      }
      if (newline === -1) break;
      yield take();
      start = newline + 1;
    }
  }
  if (size > 0 || tooLong) yield take();
}

/** What a line of the input file asks for, or why it cannot be run. */
export type LineRequest =
  | { custom_id: string; method: "POST"; url: string; body: Record<string, unknown> }
  | { custom_id: string | null; invalid: string };

export const BATCH_ENDPOINTS = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  "/v1/responses",
] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** A parsed line's request, checked against the batch's endpoint (OpenAI's rule: one per batch). */
export function lineRequest(parsed: Record<string, unknown>, endpoint: BatchEndpoint): LineRequest {
  const customId = typeof parsed.custom_id === "string" ? parsed.custom_id : null;
  if (customId === null) return { custom_id: null, invalid: "custom_id must be a string" };
  if (parsed.method !== "POST") return { custom_id: customId, invalid: 'method must be "POST"' };
  if (parsed.url !== endpoint)
    return {
      custom_id: customId,
      invalid: `url must be the batch's endpoint "${endpoint}", got ${JSON.stringify(parsed.url)}`,
    };
  const body = parsed.body;
  if (body === null || typeof body !== "object" || Array.isArray(body))
    return { custom_id: customId, invalid: "body must be a JSON object" };
  return { custom_id: customId, method: "POST", url: endpoint, body: body as Record<string, unknown> };
}

/** A line's JSON, when it is a JSON object. */
export function parseLine(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

export interface FileCheck {
  /** Lines holding a request (blank lines are skipped). */
  total: number;
  errors: { code: string; message: string; line: number | null; param: string | null }[];
}

/**
 * The validating step: a file whose lines are not all JSON objects, is longer than its bounds, has
 * a custom_id twice or holds no request fails the batch (as OpenAI's); otherwise every line is run,
 * and a line that is JSON but not a valid request becomes an error-file line.
 */
export async function checkFile(file: string, maxLines: number, maxLineBytes: number): Promise<FileCheck> {
  const errors: FileCheck["errors"] = [];
  const ids = new Set<string>();
  let total = 0;
  const fail = (code: string, message: string, line: number | null) =>
    errors.push({ code, message, line, param: null });
  for await (const { number, text } of fileLines(file, maxLineBytes)) {
    if (text !== null && text.trim() === "") continue;
    total++;
    if (total > maxLines) {
      fail("too_many_requests", `The file holds more than ${maxLines} requests (BATCH_MAX_LINES)`, number);
      break;
    }
    if (text === null) {
      fail(
        "line_too_long",
        `Line ${number} is longer than ${maxLineBytes} bytes (BATCH_MAX_LINE_BYTES)`,
        number,
      );
    } else {
      const parsed = parseLine(text);
      if (!parsed) fail("invalid_json_line", `Line ${number} is not a JSON object`, number);
      else if (typeof parsed.custom_id === "string") {
        if (ids.has(parsed.custom_id))
          fail("duplicate_custom_id", `custom_id "${parsed.custom_id}" is used more than once`, number);
        ids.add(parsed.custom_id);
      }
    }
    if (errors.length >= 100) break;
  }
  if (errors.length === 0 && total === 0) fail("empty_file", "The input file holds no request", null);
  return { total, errors };
}
