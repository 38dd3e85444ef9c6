/**
 * An OpenAI-shaped embeddings answer (`{model?, data: [{index?, embedding}]}`, each embedding a list
 * of numbers or base64 of little-endian float32s) decoded into one Float32Array of rows. Every
 * embedding's length is checked (all alike, and the known dimension if there is one) before a value
 * is copied, so an answer of the wrong shape costs a scan, never its vectors. Pure, so it runs on the
 * event loop for small answers and on a worker thread for large ones (embedding-decode.ts).
 */

/** Decoded: `rows` holds `count` vectors of `dimension` floats, input i's at row i. */
export interface DecodedEmbeddings {
  model: string | null;
  dimension: number;
  rows: Float32Array;
}

/** Why an answer cannot be used: malformed (502), or another dimension than the known one (409). */
export type EmbeddingsFailure = { malformed: string } | { otherDimension: number };

/** Values one base64 embedding of `text` holds, or null when its bytes are not whole float32s. */
function base64Length(text: string): number | null {
  const bytes = Buffer.byteLength(text, "base64");
  return bytes % 4 === 0 ? bytes / 4 : null;
}

/**
 * The `count` inputs' vectors from `answer`, or why not. `known`: the dimension earlier batches had
 * (a different one is `otherDimension`, checked before anything is built); none is longer than
 * `maxDimension`.
 */
export function decodeEmbeddings(
  answer: unknown,
  count: number,
  known: number | undefined,
  maxDimension: number,
): DecodedEmbeddings | EmbeddingsFailure {
  const malformed = (why: string) => ({ malformed: why });
  if (answer === null || typeof answer !== "object") return malformed("no data list");
  const { data, model } = answer as { data?: unknown; model?: unknown };
  if (!Array.isArray(data)) return malformed("no data list");
  if (data.length !== count) return malformed(`${data.length} embeddings for ${count} inputs`);
  // First pass: where each goes and how long it is; nothing is copied yet.
  const rowOf = new Int32Array(count).fill(-1);
  let dimension = -1;
  for (let position = 0; position < count; position++) {
    const item = data[position] as { index?: unknown; embedding?: unknown } | null;
    // OpenAI's order is `index`; a server that leaves it out answers in input order.
    const index = item?.index ?? position;
    if (typeof index !== "number" || !Number.isInteger(index) || index < 0 || index >= count)
      return malformed(`index ${String(index)} is not one of the ${count} inputs`);
    if (rowOf[index] !== -1) return malformed(`two embeddings for input ${index}`);
    rowOf[index] = position;
    const embedding = item?.embedding;
    const length = Array.isArray(embedding)
      ? embedding.length
      : typeof embedding === "string"
        ? base64Length(embedding)
        : null;
    if (length === null) return malformed(`embedding ${index} is neither a list of numbers nor base64`);
    if (length === 0) return malformed("an empty vector");
    if (dimension === -1) dimension = length;
    else if (length !== dimension)
      return malformed(`vectors of ${length} and ${dimension} dimensions together`);
  }
  if (known !== undefined && dimension !== known) return { otherDimension: dimension };
  if (dimension > maxDimension)
    return malformed(`vectors of ${dimension} dimensions; at most ${maxDimension} are read`);
  const rows = new Float32Array(count * dimension);
  for (let row = 0; row < count; row++) {
    const embedding = (data[rowOf[row]!] as { embedding: unknown }).embedding;
    const offset = row * dimension;
    if (typeof embedding === "string") {
      // Written as bytes into the row (float32 little-endian, as every platform Node runs on).
      new Uint8Array(rows.buffer, offset * 4, dimension * 4).set(Buffer.from(embedding, "base64"));
    } else {
      const values = embedding as unknown[];
      for (let i = 0; i < dimension; i++) {
        const value = values[i];
        if (typeof value !== "number")
          return malformed(`embedding ${row} is neither a list of numbers nor base64`);
        rows[offset + i] = value;
      }
    }
    for (let i = offset; i < offset + dimension; i++)
      if (!Number.isFinite(rows[i]!)) return malformed("a value that is not a finite number");
  }
  return { model: typeof model === "string" && model !== "" ? model : null, dimension, rows };
}
