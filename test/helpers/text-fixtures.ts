/** Deterministic text fixtures for chunker and store tests. */
export { seededRandom } from "../../scripts/lib/seeded-random.js";

const WORDS = (
  "the of and to in is was for on that with as by at from this are be it an which or have " +
  "index search document chunk query answer model token vector score retrieval engine storage " +
  "paragraph sentence window boundary overlap offset tenant version snapshot write crash"
).split(" ");

/**
 * Prose of about `length` characters: sentences of 5 … 25 words, a paragraph break after a
 * sentence with probability `paragraphChance`.
 */
export function makeProse(random: () => number, length: number, paragraphChance = 0.15): string {
  const parts: string[] = [];
  let size = 0;
  while (size < length) {
    const n = 5 + Math.floor(random() * 21);
    const words: string[] = [];
    for (let i = 0; i < n; i++) words.push(WORDS[Math.floor(random() * WORDS.length)]!);
    const first = words[0]!;
    words[0] = first[0]!.toUpperCase() + first.slice(1);
    const sentence = words.join(" ") + (random() < 0.1 ? "?" : ".");
    const sep = random() < paragraphChance ? "\n\n" : " ";
    parts.push(sentence, sep);
    size += sentence.length + sep.length;
  }
  parts.pop();
  return parts.join("");
}
