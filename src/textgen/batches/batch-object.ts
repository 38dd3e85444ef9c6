/** OpenAI's batch object, and what the store keeps with it (batch-runner.ts, batch-routes.ts). */
import type { Principal } from "../../core/auth.js";
import type { BatchEndpoint } from "./jsonl.js";

export type BatchStatus =
  | "validating"
  | "failed"
  | "in_progress"
  | "finalizing"
  | "completed"
  | "expired"
  | "cancelling"
  | "cancelled";

export interface BatchError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

export interface BatchObject {
  id: string;
  object: "batch";
  endpoint: BatchEndpoint;
  errors: { object: "list"; data: BatchError[] } | null;
  input_file_id: string;
  completion_window: "24h";
  status: BatchStatus;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: number;
  in_progress_at: number | null;
  expires_at: number;
  finalizing_at: number | null;
  completed_at: number | null;
  failed_at: number | null;
  expired_at: number | null;
  cancelling_at: number | null;
  cancelled_at: number | null;
  request_counts: { total: number; completed: number; failed: number };
  metadata: Record<string, string> | null;
}

/** The owner a batch's lines act for: the key's principal when it was created (its key is not kept). */
export interface StoredOwner {
  tenant: string;
  scopes: string[];
  admin: boolean;
  keyId: string;
}

/** The JSON a batch's row holds. */
export interface BatchState {
  batch: BatchObject;
  /** null: API keys were off. */
  owner: StoredOwner | null;
}

export const ACTIVE: ReadonlySet<BatchStatus> = new Set([
  "validating",
  "in_progress",
  "finalizing",
  "cancelling",
]);

export function ownerOf(principal: Principal | null): StoredOwner | null {
  return (
    principal && {
      tenant: principal.tenant,
      scopes: [...principal.scopes],
      admin: principal.admin,
      keyId: principal.keyId,
    }
  );
}

export function principalOf(owner: StoredOwner | null): Principal | null {
  return owner && { ...owner, scopes: new Set(owner.scopes) };
}
