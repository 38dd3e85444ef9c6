/** Embeddings shortened to the `dimensions` a client asks for (OpenAI's and Ollama's field). */

/**
 * The first `dimensions` values, scaled back to unit length: how Matryoshka-trained models (and
 * OpenAI's text-embedding-3) shorten an embedding. A model not trained that way still gives vectors of
 * the asked size, but their similarities are only as good as its first dimensions happen to be.
 */
export function truncated(vector: Float32Array, dimensions: number | undefined): Float32Array {
  if (dimensions === undefined || dimensions >= vector.length) return vector;
  const head = vector.slice(0, dimensions);
  let norm = 0;
  for (const value of head) norm += value * value;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < head.length; i++) head[i]! /= norm;
  return head;
}
