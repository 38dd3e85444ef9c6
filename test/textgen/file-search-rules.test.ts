/**
 * The file_search rules that need no server: merging several stores' results, the citations of an
 * answer, the passages given to the model, the tool's checks, and reading a search result tolerantly
 * (today's, with its extra `file` key, and one without filename).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DomainError } from "../../src/core/errors.js";
import {
  mergeResults,
  parseResult,
  type FileSearchResult,
} from "../../src/textgen/http/dialects/file-search.js";
import { citations, fileSearchTool, withPassages } from "../../src/textgen/http/dialects/file-search-tool.js";

const result = (file_id: string, score: number, filename = `${file_id}.md`): FileSearchResult => ({
  file_id,
  filename,
  score,
  attributes: {},
  text: `text of ${file_id}`,
});

describe("file_search rules", () => {
  it("merge: best score first, equal scores in store order, below the threshold dropped, cut to the maximum", () => {
    const merged = mergeResults(
      [
        [result("a", 1), result("b", 0.4)],
        [result("c", 1), result("d", 0.7), result("e", 0.1)],
      ],
      { maxNumResults: 3, scoreThreshold: 0.2 },
    );
    assert.deepEqual(
      merged.map((r) => r.file_id),
      ["a", "c", "d"],
    );
    assert.deepEqual(
      mergeResults([[result("a", 0.5)], [result("b", 0.1)]], { maxNumResults: 10, scoreThreshold: 0.2 }).map(
        (r) => r.file_id,
      ),
      ["a"],
    );
  });

  it("citations: each [n] of a passage found, after its marker; none: each distinct file at the end", () => {
    const results = [result("a", 1), result("b", 0.5), result("a", 0.4, "a.md")];
    assert.deepEqual(citations("See [2] and [3]; not [4] or [0].", results), [
      { type: "file_citation", file_id: "b", filename: "b.md", index: 7 },
      { type: "file_citation", file_id: "a", filename: "a.md", index: 15 },
    ]);
    assert.deepEqual(citations("No marker [9].", results), [
      { type: "file_citation", file_id: "a", filename: "a.md", index: 14 },
      { type: "file_citation", file_id: "b", filename: "b.md", index: 14 },
    ]);
    assert.deepEqual(citations("Nothing found.", []), []);
  });

  it("passages go into the latest user message only; none found: the messages as they were", () => {
    const messages = [
      { role: "user" as const, content: "first" },
      { role: "assistant" as const, content: "reply" },
      { role: "user" as const, content: "second" },
    ];
    const given = withPassages(messages, [result("a", 1), result("b", 0.5)]);
    assert.equal(given[0]!.content, "first");
    assert.equal(given[1]!.content, "reply");
    assert.match(given[2]!.content, /\[1\] a\.md:\ntext of a\n\n\[2\] b\.md:\ntext of b\n/);
    assert.ok(given[2]!.content.endsWith("second"));
    assert.equal(withPassages(messages, []), messages);
  });

  it("the tool: OpenAI's default of 10 results, its bounds, one file_search only", () => {
    assert.deepEqual(fileSearchTool([{ type: "function" }]), undefined);
    assert.deepEqual(fileSearchTool([{ type: "file_search", vector_store_ids: ["x", "x", "y"] }]), {
      storeIds: ["x", "y"],
      maxNumResults: 10,
    });
    const twice = { type: "file_search", vector_store_ids: ["x"] };
    assert.throws(
      () => fileSearchTool([twice, twice]),
      (error: unknown) => error instanceof DomainError && error.kind === "invalid",
    );
    for (const max of [0, 51, 2.5, "3"])
      assert.throws(() => fileSearchTool([{ ...twice, max_num_results: max }]), DomainError);
  });

  it("a page's results read tolerantly: today's extra `file` key, no filename, no file_id", () => {
    assert.deepEqual(
      parseResult({
        file_id: "f1",
        filename: "one.md",
        file: "one.md",
        score: 0.9,
        attributes: { k: 1 },
        content: [
          { type: "text", text: "x" },
          { type: "text", text: "y" },
        ],
      }),
      { file_id: "f1", filename: "one.md", score: 0.9, attributes: { k: 1 }, text: "x\ny" },
    );
    assert.deepEqual(parseResult({ file_id: "f2", file: "two.md", score: 0.3, content: [] }), {
      file_id: "f2",
      filename: "two.md",
      score: 0.3,
      attributes: {},
      text: "",
    });
    assert.equal(parseResult({ file_id: "f3" })?.filename, "f3", "cited by its id");
    assert.equal(parseResult({ score: 0.2 }), undefined);
  });
});
