/**
 * Requests a server makes to itself (the Batch API runs each line through `app.inject`, so a line
 * meets the same validation, generation and encoding as an interactive request of its endpoint).
 * Such a request acts for the principal that started the work (the batch's owner, whose key the
 * server never keeps) and at batch priority. It carries a one-time token in a header: 32 random bytes
 * that exist only while the call runs, known only to this process, so no client can pass for one.
 * (AsyncLocalStorage would carry no header, but its context does not survive Fastify's inject.)
 */
import { randomBytes } from "node:crypto";
import type { FastifyRequest } from "fastify";
import type { Principal } from "./principal.js";

export interface InternalCall {
  /** Whom the call acts for; null with API keys off. */
  principal: Principal | null;
  /** A batch line: admitted after interactive requests and preempted by them (scheduler.ts). */
  priority: "batch";
}

const HEADER = "x-lectern-internal-call";
const calls = new Map<string, InternalCall>();

/** Runs `work` with the headers that make its injected request an internal call. */
export async function withInternalCall<T>(
  call: InternalCall,
  work: (headers: Record<string, string>) => Promise<T>,
): Promise<T> {
  const token = randomBytes(32).toString("base64url");
  calls.set(token, call);
  try {
    return await work({ [HEADER]: token });
  } finally {
    calls.delete(token);
  }
}

/** The internal call a request is, if it is one. */
export function internalCallOf(request: FastifyRequest): InternalCall | undefined {
  const token = request.headers[HEADER];
  return typeof token === "string" ? calls.get(token) : undefined;
}

/** The scheduling priority of the request (interactive unless it is a batch line). */
export function priorityOf(request: FastifyRequest): "interactive" | "batch" {
  return internalCallOf(request)?.priority ?? "interactive";
}
