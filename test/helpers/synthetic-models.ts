/**
 * Small synthetic GGUFs for the engine's tests (scripts/lib/synthetic-gguf.ts, the test model's
 * vocabulary): a crafted "chain" model whose greedy answer is known, a second chain for a mismatched
 * draft, a "soft" chain for sampling tests, random-weight models and LoRA adapters. Written once
 * per machine into the temp folder (their names say what they hold).
 */
import os from "node:os";
import path from "node:path";
import {
  syntheticLora,
  syntheticModel,
  type SyntheticLoraSpec,
  type SyntheticOptions,
  type SyntheticShape,
} from "../../scripts/lib/synthetic-gguf.js";
import { testModelPath } from "./env.js";

/** Tiny: two layers 64 wide; a model of this shape decodes in well under a millisecond. */
export const TINY_SHAPE: SyntheticShape = {
  embedding: 64,
  feedForward: 128,
  layers: 2,
  heads: 2,
  kvHeads: 2,
};

/** Texts of distinct tokens (the chain model's rule) in the test model's vocabulary. */
export const CHAIN_TEXT = " Once upon a time there was one little dog named Max who liked to run";
export const OTHER_CHAIN_TEXT = " The big ball fell down the hill and a cat saw it";

const dir = path.join(os.tmpdir(), "lectern-test-models");

export function tinyModel(
  options: SyntheticOptions = {},
  shape: SyntheticShape = TINY_SHAPE,
): Promise<string> {
  return syntheticModel(testModelPath, shape, { dir, ...options });
}

export function tinyLora(spec: SyntheticLoraSpec, shape: SyntheticShape = TINY_SHAPE): Promise<string> {
  return syntheticLora(testModelPath, shape, spec, dir);
}
