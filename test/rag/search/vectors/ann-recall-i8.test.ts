import { it } from "node:test";

import { checkRecall } from "./ann-recall.js";

it("HNSW recall@10 ≥ 0.95 against exact search, 20k × 384-d i8", (t) => {
  t.diagnostic(`recall@10 (none, a tenth deleted): ${checkRecall("i8").join(", ")}`);
});
