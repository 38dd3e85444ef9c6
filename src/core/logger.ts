/** pino options shared by both apps: JSON lines, with secrets redacted before they reach a log. */
import type { LoggerOptions } from "pino";

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: {
      paths: ["req.headers.authorization", "headers.authorization", "*.apiKey", "*.api_key"],
      censor: "[redacted]",
    },
  };
}
