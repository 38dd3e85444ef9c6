/** Deterministic text for the soak: prose documents, questions, prompts, and unique tokens. */
import { seededRandom } from "./seeded-random.js";

export { seededRandom };

const WORDS = (
  "river stone forest bird planet ocean whale coral volcano lava bread dough oven garden winter summer " +
  "library archive index search document chunk query answer model token vector score engine storage " +
  "paragraph sentence window boundary overlap tenant version snapshot harbour lantern meadow glacier"
).split(" ");

export const pick = <T>(random: () => number, items: readonly T[]): T =>
  items[Math.floor(random() * items.length)]!;

/** Prose of about `length` characters. */
export function prose(random: () => number, length: number): string {
  const words: string[] = [];
  let size = 0;
  while (size < length) {
    const word = pick(random, WORDS);
    words.push(word);
    size += word.length + 1;
  }
  return words.join(" ") + ".";
}

export function question(random: () => number): string {
  return Array.from({ length: 2 + Math.floor(random() * 4) }, () => pick(random, WORDS)).join(" ");
}

const PROMPTS = [
  "Once upon a time",
  "The little girl went to the park",
  "One day, a big dog",
  "Tom and his friend",
  "The sun was shining and",
];
export const prompt = (random: () => number) => pick(random, PROMPTS);

/**
 * A word that occurs in exactly one document: letters and digits only, ending in "z" so that no
 * stemming rule changes it.
 */
export const uniqueToken = (n: number) => `uq${n.toString(36)}z`;
