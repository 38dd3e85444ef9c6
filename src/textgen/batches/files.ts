/**
 * The Files API as the Batch API needs it: input files (purpose "batch") kept under
 * DATA_DIR/batch-files/<tenant>/, their objects in the store; output and error files built from a
 * batch's recorded lines when read, so they hold each line once whatever crashes came between.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import type { Readable } from "node:stream";
import { notFound, tooLarge } from "../../core/errors.js";
import type { BatchBackend } from "../store/types.js";

export interface FileObject {
  id: string;
  object: "file";
  bytes: number;
  created_at: number;
  filename: string;
  purpose: "batch" | "batch_output";
  status: "processed";
  expires_at: null;
  status_details: null;
}

/** What the store keeps: the object and where its content comes from. */
interface StoredFile {
  file: FileObject;
  /** An input file's content is on disk; an output or error file is its batch's recorded lines. */
  source: { kind: "upload" } | { kind: "output" | "error"; batchId: string };
}

export const newId = (prefix: string) => `${prefix}${randomBytes(12).toString("hex")}`;
const unixSeconds = (ms: number) => Math.floor(ms / 1000);

export const fileGone = (id: string) => notFound(`No such File object: ${id}`);

export class BatchFiles {
  constructor(
    private readonly tables: BatchBackend,
    private readonly dataDir: string,
  ) {}

  /** Where an input file's content is (tenants are checked ids: safe as a path segment). */
  pathOf(tenant: string, id: string): string {
    return path.join(this.dataDir, "batch-files", tenant, `${id}.jsonl`);
  }

  /** Writes an upload to disk (refused past `maxBytes`), then records its object. */
  async upload(tenant: string, filename: string, content: Readable, maxBytes: number): Promise<FileObject> {
    const id = newId("file-");
    const where = this.pathOf(tenant, id);
    await fs.promises.mkdir(path.dirname(where), { recursive: true });
    try {
      await pipeline(content, fs.createWriteStream(where));
      if ((content as { truncated?: boolean }).truncated)
        throw tooLarge(`The file is larger than ${maxBytes} bytes (BATCH_MAX_FILE_BYTES)`, [
          { limit_bytes: maxBytes },
        ]);
      const now = Date.now();
      const file: FileObject = {
        id,
        object: "file",
        bytes: (await fs.promises.stat(where)).size,
        created_at: unixSeconds(now),
        filename: filename.slice(0, 256),
        purpose: "batch",
        status: "processed",
        expires_at: null,
        status_details: null,
      };
      await this.tables.saveFile(tenant, id, JSON.stringify({ file, source: { kind: "upload" } }), now);
      return file;
    } catch (error) {
      await fs.promises.rm(where, { force: true });
      throw error;
    }
  }

  /** Records a batch's output or error file (its content is read from the recorded lines). */
  async recordResults(tenant: string, batchId: string, kind: "output" | "error", bytes: number) {
    const now = Date.now();
    const file: FileObject = {
      id: newId("file-"),
      object: "file",
      bytes,
      created_at: unixSeconds(now),
      filename: `${batchId}_${kind}.jsonl`,
      purpose: "batch_output",
      status: "processed",
      expires_at: null,
      status_details: null,
    };
    const stored: StoredFile = { file, source: { kind, batchId } };
    await this.tables.saveFile(tenant, file.id, JSON.stringify(stored), now);
    return file;
  }

  async get(tenant: string, id: string): Promise<FileObject> {
    return (await this.stored(tenant, id)).file;
  }

  async list(tenant: string, after: string | undefined, limit: number) {
    const page = await this.tables.listFiles(tenant, after, limit);
    if (page === "no_cursor") throw fileGone(after!);
    const data = page.rows.map((row) => (JSON.parse(row) as StoredFile).file);
    return {
      object: "list" as const,
      data,
      first_id: data[0]?.id ?? null,
      last_id: data.at(-1)?.id ?? null,
      has_more: page.hasMore,
    };
  }

  /** The file's content: a stream of the upload, or its batch's recorded lines as JSONL. */
  async content(tenant: string, id: string): Promise<Readable | string> {
    const { source } = await this.stored(tenant, id);
    if (source.kind === "upload") return fs.createReadStream(this.pathOf(tenant, id));
    const lines = await this.tables.lineResults(tenant, source.batchId, source.kind === "output");
    return lines.map((line) => `${line}\n`).join("");
  }

  async delete(tenant: string, id: string): Promise<void> {
    const { source } = await this.stored(tenant, id);
    if (!(await this.tables.deleteFile(tenant, id))) throw fileGone(id);
    if (source.kind === "upload") await fs.promises.rm(this.pathOf(tenant, id), { force: true });
  }

  private async stored(tenant: string, id: string): Promise<StoredFile> {
    const json = await this.tables.file(tenant, id);
    if (json === undefined) throw fileGone(id);
    return JSON.parse(json) as StoredFile;
  }
}
