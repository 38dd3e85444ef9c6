/**
 * A large value sent from a worker thread to the event loop in pieces, so that receiving it never
 * holds the loop: structured cloning costs about as much as parsing (a million short strings, or
 * 50 MB of text, take most of a second to deserialize), and a port delivers every queued message in
 * one turn of the loop. So the sender cuts long arrays into runs of RUN elements and sends long
 * strings alone, each piece only once the receiver asked for the next (the loop serves other work in
 * between), and the value's skeleton (the holes emptied) last; the receiver fills the holes.
 */
import type { MessagePort, Worker } from "node:worker_threads";

/** Elements of one array piece. */
const RUN = 2_000;
/** Strings longer than this travel alone. */
const LONG_STRING = 64 * 1024;
/** Containers deeper than this travel inside their parent (deep values are small: bodies are bounded). */
const MAX_DEPTH = 32;

type Path = Array<string | number>;

/** What travels: a run of a cut array, a long string, or the skeleton and where its holes are. */
export type Piece =
  | { hole: number; items: unknown[] }
  | { hole: number; string: string }
  | { skeleton: unknown; holes: Array<{ path: Path; kind: "array" | "string" }> };

/**
 * Sends `value` (which it empties: the sender's own) through `port` in pieces, each after the receiver
 * asked for it (`next`: resolves on its request). Typed arrays, maps and sets travel in the skeleton,
 * whose `transfer` buffers are handed over rather than copied.
 */
export async function sendInPieces(
  port: MessagePort,
  value: unknown,
  next: () => Promise<void>,
  transfer: ArrayBuffer[] = [],
): Promise<void> {
  const holes: Array<{ path: Path; kind: "array" | "string" }> = [];
  const pending: Piece[] = [];
  const cut = (node: unknown, path: Path, depth: number): unknown => {
    if (typeof node === "string") {
      if (node.length <= LONG_STRING) return node;
      pending.push({ hole: holes.length, string: node });
      holes.push({ path, kind: "string" });
      return "";
    }
    if (node === null || typeof node !== "object" || depth > MAX_DEPTH) return node;
    if (ArrayBuffer.isView(node) || node instanceof Map || node instanceof Set) return node;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) node[i] = cut(node[i], [...path, i], depth + 1);
      if (node.length <= RUN) return node;
      const hole = holes.length;
      holes.push({ path, kind: "array" });
      for (let at = 0; at < node.length; at += RUN) pending.push({ hole, items: node.slice(at, at + RUN) });
      return [];
    }
    const object = node as Record<string, unknown>;
    for (const key of Object.keys(object)) object[key] = cut(object[key], [...path, key], depth + 1);
    return object;
  };
  const skeleton = cut(value, [], 0);
  for (let i = 0; i < pending.length; i++) {
    await next();
    port.postMessage(pending[i]);
    // Sent: this thread's copy may go (the value is the sender's own, emptied as it goes).
    pending[i] = undefined as unknown as Piece;
  }
  await next();
  port.postMessage({ skeleton, holes } satisfies Piece, transfer);
}

/**
 * Receives a value sent with sendInPieces by `worker`, asking for each piece with `{ next: true }`;
 * `other` gets any other message (an error report).
 */
export function receivePieces(worker: Worker, other: (message: unknown) => void): Promise<unknown> {
  const arrays = new Map<number, unknown[]>();
  const strings = new Map<number, string>();
  return new Promise((resolve) => {
    const onMessage = (message: Piece | Record<string, unknown>) => {
      if ("items" in message && typeof message.hole === "number") {
        const run = arrays.get(message.hole) ?? [];
        for (const item of message.items as unknown[]) run.push(item);
        arrays.set(message.hole, run);
      } else if ("string" in message && typeof message.hole === "number") {
        strings.set(message.hole, message.string as string);
      } else if ("skeleton" in message) {
        worker.off("message", onMessage);
        const { skeleton, holes } = message as Extract<Piece, { skeleton: unknown }>;
        resolve(filled(skeleton, holes, arrays, strings));
        return;
      } else {
        worker.off("message", onMessage);
        other(message);
        return;
      }
      worker.postMessage({ next: true });
    };
    worker.on("message", onMessage);
    worker.postMessage({ next: true });
  });
}

/** The skeleton with its holes filled, parents before children (shorter paths first). */
function filled(
  skeleton: unknown,
  holes: Array<{ path: Path; kind: "array" | "string" }>,
  arrays: Map<number, unknown[]>,
  strings: Map<number, string>,
): unknown {
  let root = skeleton;
  const order = holes.map((hole, id) => ({ ...hole, id })).sort((a, b) => a.path.length - b.path.length);
  for (const { path, kind, id } of order) {
    const value = kind === "array" ? (arrays.get(id) ?? []) : (strings.get(id) ?? "");
    if (path.length === 0) {
      root = value;
      continue;
    }
    let parent = root as Record<string | number, unknown>;
    for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
    parent[path.at(-1)!] = value;
  }
  return root;
}

/** In a worker: the `next` of sendInPieces, resolving as the receiver asks for pieces on `port`. */
export function askedFor(port: MessagePort): () => Promise<void> {
  let asked = 0;
  let waiting: (() => void) | null = null;
  port.on("message", (message: { next?: boolean }) => {
    if (!message?.next) return;
    if (waiting === null) asked++;
    else {
      const resolve = waiting;
      waiting = null;
      resolve();
    }
  });
  return () => {
    if (asked > 0) {
      asked--;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => (waiting = resolve));
  };
}
