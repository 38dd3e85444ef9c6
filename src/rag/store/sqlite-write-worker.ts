/**
 * A worker thread that commits one large write to the SQLite store (sqlite-store.ts `write`) on a
 * connection of its own: better-sqlite3's transactions are synchronous, and the inserts of tens of
 * megabytes would otherwise hold the event loop for seconds. The write is one BEGIN IMMEDIATE
 * transaction here as inline, so a crash at any moment leaves the index as it was before or after.
 * The change arrives in parts (its documents in runs, then the rest), so that no one message copies
 * it all while the loop waits.
 */
import { parentPort, workerData } from "node:worker_threads";
import Database from "better-sqlite3";
import { DomainError } from "../../core/errors.js";
import { openConnection, sqliteWriter, withSlicedTexts, type WriteFailure } from "./sqlite-store.js";
import type { IndexWrite } from "./types.js";

const port = parentPort!;
const upsert: IndexWrite["upsert"] = [];

function failureOf(error: unknown): WriteFailure {
  if (error instanceof DomainError)
    return {
      domain: {
        kind: error.kind,
        message: error.message,
        name: error.name,
        options: { details: error.details, retryAfter: error.retryAfter, code: error.code },
      },
    };
  if (error instanceof Database.SqliteError) return { sqlite: { code: error.code, message: error.message } };
  return { failure: error instanceof Error ? (error.stack ?? error.message) : String(error) };
}

port.on("message", (message: { upsert?: IndexWrite["upsert"]; rest?: Omit<IndexWrite, "upsert"> }) => {
  if (message.upsert) {
    for (const entry of message.upsert) upsert.push(withSlicedTexts(entry));
    port.postMessage({ more: true });
    return;
  }
  const db = openConnection((workerData as { file: string }).file);
  try {
    const meta = sqliteWriter(db)({ ...message.rest!, upsert });
    port.postMessage({ meta });
  } catch (error) {
    port.postMessage({ error: failureOf(error) });
  } finally {
    db.close();
  }
});
