/**
 * The two shapes an error takes on the wire, for both apps: the contract's `{error:{code,message,
 * details}}` (ErrorResponse, the schema of every non-OpenAI route's 4xx and 5xx) and OpenAI's
 * `{error:{message,type,param,code}}` for the OpenAI-compatible routes of either app.
 */
import { Type } from "typebox";
import type { ApiError } from "./errors.js";

export const ErrorResponse = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: "machine-readable code, e.g. invalid_request" }),
      message: Type.String({ description: "what was wrong and how to fix it" }),
      details: Type.Array(Type.Unknown()),
    }),
  },
  { $id: "ErrorResponse", description: "The error shape of every non-OpenAI route" },
);

/** The response schemas of a route's errors, in the contract's shape. */
export const errorResponses = { "4xx": ErrorResponse, "5xx": ErrorResponse };

const typeByStatus: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  409: "invalid_request_error",
  413: "invalid_request_error",
  429: "rate_limit_error",
};

/** An API error in OpenAI's shape: `param` is the first detail's path, dotted. */
export function openAiErrorBody(error: ApiError) {
  const details = error.details[0] as { path?: string } | undefined;
  return {
    error: {
      message: error.message,
      type:
        typeByStatus[error.statusCode] ??
        (error.statusCode >= 500 ? "server_error" : "invalid_request_error"),
      param: details?.path ? details.path.replace(/^\//, "").replace(/\//g, ".") : null,
      code: error.code,
    },
  };
}
