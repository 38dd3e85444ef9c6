/**
 * The parse process (#35): what it runs under (RLIMIT_DATA from parseProcessDataLimit, no core
 * files, the heap flag), that the hostile PDF fixtures are real (pdf.js reads every spelling and
 * filter chain they are written with), and that a bomb only pdf.js can find is a 413 naming
 * MAX_EXTRACTED_BYTES, after which the next file parses.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, describe, it } from "node:test";
import { toApiError } from "../../../src/core/http.js";
import { DEFAULT_INGEST_LIMITS, parseProcessDataLimit } from "../../../src/rag/ingest/limits.js";
import { loadFile } from "../../../src/rag/ingest/loaders.js";
import { parseFileBytes } from "../../../src/rag/ingest/parse-pool.js";
import { ParseProcess, processLimitsFor } from "../../../src/rag/ingest/parse-process.js";
import { decoderFor, filterNamed } from "../../../src/rag/ingest/pdf-filters.js";
import {
  BOMB_SPELLINGS,
  encodeFor,
  encodeThrough,
  filteredPdf,
  spelledBombPdf,
  type BombSpelling,
  type PdfFilterName,
  type StreamSpelling,
} from "../../helpers/bomb-fixtures.js";

const MIB = 1024 * 1024;
const onLinux = process.platform === "linux";
const limits = {
  ...DEFAULT_INGEST_LIMITS,
  maxParseHeapMb: 64,
  maxExtractedBytes: 16 * MIB,
  maxParseMs: 60_000,
};

describe("a parse process", { skip: !onLinux }, () => {
  const started: ParseProcess[] = [];
  after(() => started.forEach((parser) => parser.kill()));

  it("runs under RLIMIT_DATA (heap + MAX_EXTRACTED_BYTES + overhead), without core files, with its heap flag", async () => {
    const parser = new ParseProcess(processLimitsFor(limits));
    started.push(parser);
    await parser.ready;
    const procLimits = readFileSync(`/proc/${parser.pid}/limits`, "utf8");
    const soft = (name: string) => new RegExp(`^${name}\\s+(\\S+)`, "m").exec(procLimits)?.[1];
    assert.equal(soft("Max data size"), String(parseProcessDataLimit(limits)));
    assert.equal(soft("Max core file size"), "0");
    const commandLine = readFileSync(`/proc/${parser.pid}/cmdline`, "utf8").split("\0");
    assert.ok(commandLine.includes("--max-old-space-size=64"), commandLine.join(" "));
    assert.equal(parser.dataLimit, parseProcessDataLimit(limits));
  });

  it("a PDF bomb only pdf.js can find is a 413 at MAX_EXTRACTED_BYTES; the next file parses", async () => {
    const refused = (error: unknown) => {
      const apiError = toApiError(error);
      assert.equal(apiError.statusCode, 413, apiError.message);
      assert.match(apiError.message, /"crypt\.pdf".*MAX_EXTRACTED_BYTES/);
      return true;
    };
    await assert.rejects(parseFileBytes("crypt.pdf", spelledBombPdf("crypt-filter", 800), limits), refused);
    const next = await parseFileBytes("next.md", Buffer.from("# Next\n\nStill parsing.\n"), limits);
    assert.equal(next.title, "Next");
  });
});

describe("the hostile PDF fixtures are read by pdf.js as written", () => {
  const text = "BT /F1 12 Tf 72 720 Td (Spelled and filtered) Tj ET";
  const plain: StreamSpelling = {
    key: "Filter",
    placement: "direct",
    objInDictionary: false,
    commentAfterKey: false,
    encryption: "none",
  };

  it("every filter's encoder round-trips through the decoders of the inflation check", async () => {
    const data = Buffer.concat([
      Buffer.from("hello hello hello "),
      Buffer.alloc(3000, 7),
      Buffer.from([0, 0, 0, 0, 1, 2]),
    ]);
    for (const filter of [
      "FlateDecode",
      "ASCIIHexDecode",
      "ASCII85Decode",
      "RunLengthDecode",
      "LZWDecode",
    ] as const) {
      const decoder = decoderFor(filterNamed(filter)!);
      const pieces: Buffer[] = [];
      decoder.on("data", (piece: Buffer) => pieces.push(piece));
      const ended = new Promise((resolve) => decoder.on("end", resolve));
      decoder.end(encodeFor(filter, data));
      await ended;
      assert.ok(Buffer.concat(pieces).equals(data), filter);
    }
  });

  const chains: PdfFilterName[][] = [
    ["FlateDecode"],
    ["ASCIIHexDecode", "FlateDecode"],
    ["ASCII85Decode", "LZWDecode", "FlateDecode"],
    ["RunLengthDecode", "ASCIIHexDecode"],
  ];
  for (const spelling of Object.keys(BOMB_SPELLINGS) as BombSpelling[]) {
    it(`spelled "${spelling}", through ${chains.length} filter chains`, async () => {
      for (const chain of chains) {
        const options = { ...plain, ...BOMB_SPELLINGS[spelling] } as StreamSpelling;
        const pdf = filteredPdf(encodeThrough(chain, Buffer.from(text, "latin1")), chain, options);
        const loaded = await loadFile("spelled.pdf", pdf);
        assert.equal(loaded.text, "Spelled and filtered", `${spelling} ${chain.join(" ")}`);
      }
    });
  }
});
