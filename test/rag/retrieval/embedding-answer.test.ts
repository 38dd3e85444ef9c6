/**
 * Embedding answers decoded (src/rag/retrieval/embedding-answer.ts, embedding-decode.ts): rows placed
 * by `index`, lists and base64 alike; every length checked before a value is copied (a dimension other
 * than the known one, or past the maximum, builds nothing); an answer past INLINE_BYTES decoded on a
 * worker thread to the very rows decoded inline.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeEmbeddings } from "../../../src/rag/retrieval/embedding-answer.js";
import { decodeAnswer, INLINE_BYTES, parseAndDecode } from "../../../src/rag/retrieval/embedding-decode.js";

const base64 = (values: number[]) => Buffer.from(new Float32Array(values).buffer).toString("base64");

describe("embedding answers", () => {
  it("rows by index, from lists and base64", () => {
    const decoded = decodeEmbeddings(
      {
        model: "m",
        data: [
          { index: 1, embedding: base64([3, 4]) },
          { index: 0, embedding: [1, 2] },
        ],
      },
      2,
      undefined,
      8,
    );
    assert.ok("rows" in decoded, JSON.stringify(decoded));
    assert.deepEqual([...decoded.rows], [1, 2, 3, 4]);
    assert.equal(decoded.dimension, 2);
    assert.equal(decoded.model, "m");
  });

  it("lengths checked before anything is built", () => {
    const answer = (lengths: number[]) => ({
      data: lengths.map((n) => ({ embedding: new Array(n).fill(1) })),
    });
    assert.deepEqual(decodeEmbeddings(answer([3, 3]), 2, 4, 8), { otherDimension: 3 });
    assert.deepEqual(decodeEmbeddings(answer([9]), 1, undefined, 8), {
      malformed: "vectors of 9 dimensions; at most 8 are read",
    });
    assert.deepEqual(decodeEmbeddings(answer([2, 3]), 2, undefined, 8), {
      malformed: "vectors of 3 and 2 dimensions together",
    });
    assert.deepEqual(decodeEmbeddings(answer([2]), 2, undefined, 8), {
      malformed: "1 embeddings for 2 inputs",
    });
    assert.deepEqual(decodeEmbeddings({ data: [{ embedding: [1, "x"] }] }, 1, undefined, 8), {
      malformed: "embedding 0 is neither a list of numbers nor base64",
    });
    assert.deepEqual(decodeEmbeddings({ data: [{ embedding: [1, 1e39] }] }, 1, undefined, 8), {
      malformed: "a value that is not a finite number",
    });
  });

  it("a large answer is decoded on a worker thread to the rows decoded inline", async () => {
    const count = 160;
    const dimension = 4096;
    const data = Array.from({ length: count }, (_, index) => ({
      index: count - 1 - index,
      embedding: Array.from({ length: dimension }, (_, d) => ((index * 31 + d) % 97) / 97),
    }));
    const bytes = Buffer.from(JSON.stringify({ data }));
    assert.ok(bytes.byteLength > INLINE_BYTES, `${bytes.byteLength} bytes`);
    const inline = parseAndDecode(bytes, count, undefined, 8192);
    const offThread = await decodeAnswer(Buffer.from(bytes), count, undefined, 8192);
    assert.ok("rows" in inline && "rows" in offThread);
    assert.deepEqual(offThread.rows, inline.rows);
    assert.deepEqual(
      await decodeAnswer(Buffer.from("{not json".padEnd(INLINE_BYTES + 10)), 1, undefined, 8),
      {
        notJson: "{not json".padEnd(80),
      },
    );
  });
});
