/**
 * Items as they are kept and listed: the shape OpenAI's input_items and conversation items have
 * (every item has an id; a message has a type, a status and content parts), whatever shorthand the
 * client sent (`{role, content: "text"}`). The decoder reads both shapes, so a kept item goes back
 * into a prompt as it came.
 */
import { randomBytes } from "node:crypto";
import { badRequest } from "../../core/errors.js";
import type { ResponseItem } from "../http/dialects/openai-responses.js";
import type { ItemRow } from "./types.js";

export const newId = (prefix: string) => `${prefix}_${randomBytes(12).toString("hex")}`;

const ID_PREFIX: Record<string, string> = {
  message: "msg",
  function_call: "fc",
  function_call_output: "fco",
  reasoning: "rs",
};

const ROLES = ["user", "system", "developer", "assistant"];

/** A message's content as parts: a string becomes one input_text (output_text for the assistant). */
function contentParts(role: string, content: unknown): unknown {
  if (typeof content !== "string") return content;
  return role === "assistant"
    ? [{ type: "output_text", text: content, annotations: [] }]
    : [{ type: "input_text", text: content }];
}

/** One item in its kept shape; `path` names it in a 400 (a message needs a role the API knows). */
export function normaliseItem(item: ResponseItem, path: string): ResponseItem {
  const type = typeof item.type === "string" ? item.type : "message";
  const id = typeof item.id === "string" && item.id !== "" ? item.id : newId(ID_PREFIX[type] ?? "item");
  if (type !== "message") {
    const status = needsStatus(type) ? { status: item.status ?? "completed" } : {};
    const head = { id, type };
    return { ...head, ...item, ...head, ...status };
  }
  const role = item.role;
  if (typeof role !== "string" || !ROLES.includes(role))
    throw badRequest(
      `${path.slice(1).replace(/\//g, ".")}.role must be user, system, developer or assistant`,
      [{ path: `${path}/role` }],
    );
  // The id and type first, as OpenAI lists them; what the client sent keeps its place after.
  const kept = { id, type, status: item.status ?? "completed", role, ...item };
  return { ...kept, id, type, status: kept.status, content: contentParts(role, item.content) };
}

const needsStatus = (type: string) => type === "function_call" || type === "function_call_output";

export const toRow = (item: ResponseItem): ItemRow => ({ id: String(item.id), json: JSON.stringify(item) });
