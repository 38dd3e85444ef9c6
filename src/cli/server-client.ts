/**
 * The running apps, as the `lectern` command reaches them (LECTERN_URL, LECTERN_RAG_URL, default the
 * local ports): `models`, `generate` and `ask` ask a running app when one answers, so they show what
 * it serves and use its loaded model, instead of loading another copy of the model in the command.
 * Only Node's fetch: this module must stay cheap to import (the CLI's start-up time).
 */
import { DomainError, type ErrorKind } from "../core/errors.js";

/**
 * How long an app has to answer `GET /` before the command works in process instead. A refused
 * connection answers at once; the bound is for a host that drops packets, and is generous because a
 * busy machine (a model loading beside the app) may take a second to answer.
 */
const PROBE_TIMEOUT_MS = 3_000;

export interface RunningApp {
  url: string;
  headers: Record<string, string>;
}

/** The app at `url` when it answers as a Lectern app of that kind; null when nothing answers there. */
export async function findApp(
  url: string,
  kind: "Text Generation" | "RAG",
  apiKey: string | null,
): Promise<RunningApp | null> {
  let body: unknown;
  try {
    const response = await fetch(`${url}/`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    body = await response.json();
  } catch {
    return null;
  }
  const message = (body as { message?: unknown } | null)?.message;
  if (typeof message !== "string" || !message.startsWith(`Lectern ${kind} API`)) return null;
  return { url, headers: apiKey === null ? {} : { authorization: `Bearer ${apiKey}` } };
}

/** HTTP statuses as the domain errors the CLI turns into exit codes. */
function kindOf(status: number): ErrorKind {
  if (status === 404) return "not_found";
  if (status === 409) return "conflict";
  if (status === 413) return "too_large";
  if (status === 429) return "busy";
  if (status >= 400 && status < 500) return "invalid";
  if (status === 504) return "timeout";
  if (status === 503) return "not_ready";
  return "upstream";
}

/** An error answer of an app as a DomainError carrying its message (and the app's URL). */
async function failure(app: RunningApp, response: Response): Promise<DomainError> {
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = (await response.json()) as { error?: { message?: string } };
    if (body.error?.message) message = body.error.message;
  } catch {
    // Not JSON: the status line says enough.
  }
  return new DomainError(kindOf(response.status), `${app.url} answered: ${message}`);
}

export async function getJson<T>(app: RunningApp, route: string): Promise<T> {
  const response = await fetch(`${app.url}${route}`, { headers: app.headers });
  if (!response.ok) throw await failure(app, response);
  return (await response.json()) as T;
}

export async function postJson<T>(app: RunningApp, route: string, body: unknown): Promise<T> {
  const response = await fetch(`${app.url}${route}`, {
    method: "POST",
    headers: { ...app.headers, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await failure(app, response);
  return (await response.json()) as T;
}

/**
 * POSTs with `stream: true` and reads the server-sent events: `onToken` with each `{"token"}` piece,
 * and the `done` event's whole response returned; an `error` event is thrown. A JSON answer (nothing
 * was streamed) is returned as it is.
 */
export async function postStream<T>(
  app: RunningApp,
  route: string,
  body: Record<string, unknown>,
  onToken: (piece: string) => void,
): Promise<T> {
  const response = await fetch(`${app.url}${route}`, {
    method: "POST",
    headers: { ...app.headers, "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  if (!response.ok || response.body === null) throw await failure(app, response);
  // An answer with nothing to stream (RAG's extractive answers) comes whole, as JSON.
  if (!String(response.headers.get("content-type")).startsWith("text/event-stream"))
    return (await response.json()) as T;
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trimStart();
      }
      if (data === "") continue;
      const parsed = JSON.parse(data) as { token?: string; error?: { message?: string } };
      if (event === "done") return parsed as T;
      if (event === "error")
        throw new DomainError("upstream", `${app.url} answered: ${parsed.error?.message ?? data}`);
      if (typeof parsed.token === "string") onToken(parsed.token);
    }
  }
  throw new DomainError("upstream", `${app.url} ended the stream before its answer was complete`);
}
