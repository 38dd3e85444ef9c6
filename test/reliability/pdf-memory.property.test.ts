/**
 * Property (#35): whatever filter chain and dictionary spelling a PDF's content stream is written
 * with, parsing it never grows the parse process's memory past MAX_EXTRACTED_BYTES plus a fixed
 * overhead, and it is answered: text, or a 4xx.
 *
 * fast-check draws PDFs whose content stream is a deflate bomb (1–512 MiB decoded, most far past
 * MAX_EXTRACTED_BYTES, some within it) behind up to two more filters (ASCIIHex, ASCII85, RunLength, LZW, Flate), its
 * filters under `/Filter` or `/F`, given in the dictionary, by reference or from an object stream,
 * with `obj` and comments inside the dictionary, plain, RC4-encrypted or AES-encrypted behind
 * `/Crypt`. Each is parsed through the parse pool, as uploads are, while every process below this one
 * is sampled for its peak resident memory. The fixed overhead: the parse process's heap
 * (MAX_PARSE_HEAP_MB), Node's own memory (PARSE_PROCESS_OVERHEAD_BYTES) and what RLIMIT_DATA does not
 * count (mapped code, the main stack: 128 MiB). Without the limit, one such bomb grows a parser past
 * 2 GB.
 *
 * FUZZ_SEED fixes the draw (default fixed; "random" draws one); the run stops drawing after 50 s
 * (PDF_PROPERTY_SECONDS), so it fits CI whatever the machine's speed.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { toApiError } from "../../src/core/http.js";
import {
  DEFAULT_INGEST_LIMITS,
  PARSE_PROCESS_OVERHEAD_BYTES,
  semiSpaceMb,
} from "../../src/rag/ingest/limits.js";
import { parseFileBytes } from "../../src/rag/ingest/parse-pool.js";
import {
  bombContent,
  encodeThrough,
  filteredPdf,
  type PdfFilterName,
  type StreamSpelling,
} from "../helpers/bomb-fixtures.js";
import { FUZZ_SEED } from "../helpers/fuzz-http.js";
import { sampleDescendantPeaks } from "../helpers/process-memory.js";

const MIB = 1024 * 1024;
const onLinux = process.platform === "linux";
const SECONDS = Number(process.env.PDF_PROPERTY_SECONDS ?? 50);

const limits = {
  ...DEFAULT_INGEST_LIMITS,
  maxExtractedBytes: 8 * MIB,
  maxParseHeapMb: 48,
  maxParseMs: 120_000,
  maxConcurrentParses: 1,
};
const FIXED_OVERHEAD =
  PARSE_PROCESS_OVERHEAD_BYTES +
  (limits.maxParseHeapMb + 3 * semiSpaceMb(limits.maxParseHeapMb)) * MIB +
  128 * MIB;

const outerFilter = fc.constantFrom<PdfFilterName>(
  "ASCIIHexDecode",
  "ASCII85Decode",
  "RunLengthDecode",
  "LZWDecode",
  "FlateDecode",
);

const spelling: fc.Arbitrary<StreamSpelling> = fc
  .record({
    key: fc.constantFrom<StreamSpelling["key"]>("Filter", "F"),
    placement: fc.constantFrom<StreamSpelling["placement"]>("direct", "indirect", "object-stream"),
    objInDictionary: fc.boolean(),
    commentAfterKey: fc.boolean(),
    encryption: fc.constantFrom<StreamSpelling["encryption"]>("none", "rc4-40", "aes-128"),
  })
  // The fixtures do not encrypt object streams.
  .map((s) => (s.placement === "object-stream" ? { ...s, encryption: "none" as const } : s));

const hostilePdf = fc
  .record({
    outer: fc.array(outerFilter, { maxLength: 2 }),
    mebibytes: fc.constantFrom(1, 2, 64, 256, 512),
    spelling,
  })
  .map(({ outer, mebibytes, spelling }) => {
    // The bomb is deflated once already (cheaply): FlateDecode is the last filter of the chain.
    const chain: PdfFilterName[] = [...outer, "FlateDecode"];
    // Spaces before a short text: pdf.js's lexer skips them, so memory grows as fast as it inflates.
    const pdf = filteredPdf(encodeThrough(outer, bombContent(mebibytes, " ")), chain, spelling);
    return { pdf, label: `${mebibytes} MiB behind [${chain.join(" ")}], ${JSON.stringify(spelling)}` };
  });

describe("PDF memory, property (#35)", { skip: !onLinux }, () => {
  it(`random filter chains and spellings never grow a parse process past MAX_EXTRACTED_BYTES + ${FIXED_OVERHEAD / MIB} MiB`, async (t) => {
    const outcomes = new Map<string, number>();
    let largest = 0;
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(hostilePdf, async ({ pdf, label }) => {
        const sampler = sampleDescendantPeaks(process.pid, 20);
        let outcome: string;
        try {
          await parseFileBytes("random.pdf", pdf, limits);
          outcome = "text";
        } catch (error) {
          const apiError = toApiError(error);
          assert.ok(apiError.statusCode >= 400 && apiError.statusCode < 500, `${label}: ${apiError.message}`);
          outcome = `${apiError.statusCode} ${/\(([A-Z_]+)\)/.exec(apiError.message)?.[1] ?? ""}`.trim();
        }
        const peak = sampler.stop();
        runs++;
        largest = Math.max(largest, peak);
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        assert.ok(
          peak <= limits.maxExtractedBytes + FIXED_OVERHEAD,
          `${label}: a parse process reached ${Math.round(peak / MIB)} MiB`,
        );
      }),
      {
        seed: FUZZ_SEED,
        numRuns: 200,
        interruptAfterTimeLimit: SECONDS * 1000,
        markInterruptAsFailure: false,
        endOnFailure: true,
      },
    );
    t.diagnostic(
      `${runs} PDFs; outcomes ${[...outcomes].map(([k, n]) => `${k}: ${n}`).join(", ")}; largest parse ` +
        `process peak ${Math.round(largest / MIB)} MiB (bound ${Math.round((limits.maxExtractedBytes + FIXED_OVERHEAD) / MIB)} MiB)`,
    );
    assert.ok(runs >= 3, `only ${runs} PDFs in ${SECONDS} s`);
  });
});
