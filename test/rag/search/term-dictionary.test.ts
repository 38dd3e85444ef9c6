/**
 * The term dictionary's arena and hash table against a Map model: ids are stable while held, reused once
 * forgotten, and every term (Latin-1 or not) reads back exactly, through growth, deletion and compaction.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { TermDictionary } from "../../../src/rag/search/core/term-dictionary.js";
import { seededRandom as random } from "../../../scripts/lib/seeded-random.js";

describe("TermDictionary", () => {
  it("matches a Map model through acquires, releases, id reuse and compaction", () => {
    const next = random(7);
    const alphabet = ["a", "b", "z", "é", "ß", "0", "ÿ", "北", "ж", "\u{1F600}"];
    const word = (): string => {
      let w = "";
      const length = 1 + Math.floor(next() * 14);
      for (let i = 0; i < length; i++) {
        // Mostly Latin-1, sometimes a wider character.
        const pool = next() < 0.95 ? alphabet.slice(0, 7) : alphabet;
        w += pool[Math.floor(next() * pool.length)];
      }
      return w;
    };
    const dictionary = new TermDictionary();
    const model = new Map<string, { id: number; count: number }>();
    const vocabulary = Array.from({ length: 30_000 }, word);
    for (let step = 0; step < 200_000; step++) {
      const term = vocabulary[Math.floor(next() * vocabulary.length)] ?? "";
      const held = model.get(term);
      if (held === undefined || next() < 0.5) {
        const id = dictionary.acquire(term);
        if (held !== undefined) {
          assert.equal(id, held.id);
          held.count++;
        } else {
          for (const other of model.values()) assert.notEqual(other.id, id);
          model.set(term, { id, count: 1 });
        }
      } else {
        dictionary.releaseAll(Uint32Array.of(held.id));
        if (--held.count === 0) model.delete(term);
      }
      if (step % 20_000 === 0) {
        for (const [t, { id }] of model) {
          assert.equal(dictionary.idOf(t), id);
          assert.equal(dictionary.termOf(id), t);
        }
        for (const t of vocabulary.slice(0, 2000)) {
          if (!model.has(t)) assert.equal(dictionary.idOf(t), undefined);
        }
      }
    }
    // Release everything: all forgotten, nothing found.
    for (const [t, { id, count }] of model) {
      for (let i = 0; i < count; i++) dictionary.releaseAll(Uint32Array.of(id));
      assert.equal(dictionary.idOf(t), undefined);
      assert.throws(() => dictionary.termOf(id), /not in use/);
    }
    assert.equal(dictionary.acquire("again"), dictionary.idOf("again"));
  });

  it("counts live document frequencies and refuses to forget a term with live documents", () => {
    const dictionary = new TermDictionary();
    const id = dictionary.acquire("fox");
    dictionary.addDocumentFrequency(id, 2);
    assert.equal(dictionary.vocabularySize, 1);
    assert.throws(() => dictionary.releaseAll(Uint32Array.of(id)), /live documents/);
    dictionary.addDocumentFrequency(id, -2);
    assert.equal(dictionary.vocabularySize, 0);
    assert.throws(() => dictionary.addDocumentFrequency(id, -1), /negative/);
  });
});
