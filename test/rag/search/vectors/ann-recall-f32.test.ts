import { it } from "node:test";

import { checkRecall } from "./ann-recall.js";

it("HNSW recall@10 ≥ 0.95 against exact search, 20k × 384-d f32", (t) => {
  t.diagnostic(`recall@10 (none, a tenth deleted): ${checkRecall("f32").join(", ")}`);
});
