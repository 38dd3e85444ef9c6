import { checkGrammarBudget } from "./src/textgen/grammar-budget.ts";
import { DEFAULT_GRAMMAR_BUDGET as B } from "./src/textgen/llama-generator.ts";
const bomb = (d: number, leaf = '"x"') => { const l = ["root ::= a0"]; for (let i = 0; i < d; i++) l.push(`a${i} ::= a${i + 1} a${i + 1}?`); l.push(`a${d} ::= ${leaf}`); return l.join("\n"); };
const run = (name: string, g: string) => { const t = performance.now(); try { const n = checkGrammarBudget(g, B); console.log(name, "OK stacks", n, "ms", (performance.now() - t).toFixed(1), "bytes", g.length); } catch (e) { console.log(name, "ERR", (e as Error).message.slice(0, 120), "ms", (performance.now() - t).toFixed(1), g.length); } };
for (const d of [7, 8, 9, 10, 12, 40]) run("bomb" + d, bomb(d));
run("bomb40 [a-z]", bomb(40, "[a-z]"));
const nullable = (d: number) => { const l = ["root ::= a0"]; for (let i = 0; i < d; i++) l.push(`a${i} ::= a${i + 1}? a${i + 1}?`); l.push(`a${d} ::= "x"`); return l.join("\n"); };
run("nullable30", nullable(30));
run("parens", "root ::= " + "(".repeat(5000) + '"x"' + ")".repeat(5000));
run("rep", 'root ::= "abcdefghij"{1000}');
run("rep2", 'root ::= ("a"{0,40}){0,40}');
run("wide", "root ::= " + Array.from({ length: 2000 }, (_, i) => `"v${i}"`).join(" | "));
run("wide500", "root ::= " + Array.from({ length: 500 }, (_, i) => `"v${i}"`).join(" | "));
// big but simple: many rules
run("manyrules", "root ::= r0\n" + Array.from({ length: 4000 }, (_, i) => `r${i} ::= "k${i}" ${i + 1 < 4000 ? "r" + (i + 1) : ""}`).join("\n"));
process.exit(0);
