/**
 * Clustered synthetic embeddings, seeded: `clusters` random unit centres, each vector a centre plus
 * Gaussian noise of norm ≈ `spread` (so neighbours are mostly, not only, in the own cluster, as in real
 * embedding sets). The vector tests, bench/vectors.ts and bench/hybrid.ts share it.
 */
import { seededRandom } from "./seeded-random.js";

export interface SyntheticVectorOptions {
  count: number;
  dimension: number;
  seed: number;
  clusters?: number;
  spread?: number;
}

/** Standard normal draws from a uniform source (Box–Muller, the spare kept). */
export function gaussian(random: () => number): () => number {
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const out = spare;
      spare = null;
      return out;
    }
    const u = Math.max(random(), 1e-12);
    const v = random();
    const r = Math.sqrt(-2 * Math.log(u));
    spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  };
}

/** `count` rows of `dimension`, flat (row i = [i·dimension, (i+1)·dimension)). */
export function clusteredVectors(options: SyntheticVectorOptions): Float32Array {
  const { count, dimension, seed } = options;
  const clusters = Math.max(1, options.clusters ?? Math.max(1, Math.round(Math.sqrt(count) / 2)));
  const spread = options.spread ?? 0.8;
  const normal = gaussian(seededRandom(seed));
  const pick = seededRandom(seed ^ 0x5bd1e995);
  const scale = 1 / Math.sqrt(dimension);
  const centres = new Float32Array(clusters * dimension);
  for (let i = 0; i < centres.length; i++) centres[i] = normal() * scale;
  const out = new Float32Array(count * dimension);
  for (let row = 0; row < count; row++) {
    const c = Math.floor(pick() * clusters) * dimension;
    const base = row * dimension;
    for (let i = 0; i < dimension; i++) out[base + i] = (centres[c + i] ?? 0) + normal() * scale * spread;
  }
  return out;
}

/** Row i of a flat matrix, as a view. */
export function rowOf(matrix: Float32Array, dimension: number, i: number): Float32Array {
  return matrix.subarray(i * dimension, (i + 1) * dimension);
}

/** The rows of a flat matrix, as views. */
export function rowsOf(matrix: Float32Array, dimension: number): Float32Array[] {
  const rows: Float32Array[] = [];
  for (let i = 0; i < matrix.length / dimension; i++) rows.push(rowOf(matrix, dimension, i));
  return rows;
}
