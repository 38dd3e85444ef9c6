/**
 * Logging shared by both apps: pino lines with secrets redacted before they reach a log (JSON, or
 * readable lines on a terminal), and request loggers made only when used. The access-log line is written by RequestLifecycle
 * (request-lifecycle.ts).
 */
import type { FastifyBaseLogger } from "fastify";
import type { Bindings, ChildLoggerOptions, DestinationStream, LogFn, LoggerOptions } from "pino";

/**
 * Where secrets can sit in what we log. Exact paths only: a wildcard path ("*.apiKey") makes pino run
 * its redaction over every key of every line it writes; an exact path costs nothing unless the logged
 * object has its first key.
 */
export const REDACT_PATHS = [
  "req.headers.authorization",
  "req.headers['x-api-key']",
  "headers.authorization",
  "headers['x-api-key']",
  "authorization",
  "apiKey",
  "api_key",
  "generationApiKey",
  "config.apiKey",
  "config.generationApiKey",
  "config.generation.generationApiKey",
  "options.apiKey",
];

/**
 * Where log lines go for LOG_FORMAT: undefined keeps pino's JSON on stdout; on a terminal ("auto")
 * or with "pretty", pino-pretty's one line per entry (time, level, message, then the entry's fields),
 * written synchronously so start-up lines and a crash's last words are not lost. Loaded only then.
 */
export async function logDestination(
  format: "auto" | "json" | "pretty",
  terminal = process.stdout.isTTY === true,
): Promise<DestinationStream | undefined> {
  if (format === "json" || (format === "auto" && !terminal)) return undefined;
  const { default: pretty } = await import("pino-pretty");
  return pretty({
    colorize: terminal,
    sync: true,
    singleLine: true,
    translateTime: "HH:MM:ss.l",
    ignore: "pid,hostname",
  });
}

export function loggerOptions(level: string): LoggerOptions {
  return { level, redact: { paths: REDACT_PATHS, censor: "[redacted]" } };
}

/**
 * A request's logger, made when something first logs through it. Fastify gives every request a pino
 * child logger bound to its request id; making one copies pino's formatters and serialises the
 * bindings, garbage on every request. Probes, scrapes and most successful requests write no line at
 * info, so most requests never need theirs. The lines it writes are the child's, request id included.
 */
export class LazyRequestLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get child_(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings, this.options));
  }

  get level(): string {
    return this.#child?.level ?? this.options.level ?? this.parent.level;
  }

  /** pino's numeric level, which `writes()` reads instead of the name. */
  get levelVal(): number | undefined {
    if (this.#child === undefined && this.options.level === undefined)
      return (this.parent as { levelVal?: number }).levelVal;
    return (this.child_ as { levelVal?: number }).levelVal;
  }

  set level(level: string) {
    this.child_.level = level;
  }

  fatal(...args: Parameters<LogFn>): void {
    this.child_.fatal(...args);
  }
  error(...args: Parameters<LogFn>): void {
    this.child_.error(...args);
  }
  warn(...args: Parameters<LogFn>): void {
    this.child_.warn(...args);
  }
  info(...args: Parameters<LogFn>): void {
    this.child_.info(...args);
  }
  debug(...args: Parameters<LogFn>): void {
    this.child_.debug(...args);
  }
  trace(...args: Parameters<LogFn>): void {
    this.child_.trace(...args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.child_.child(bindings, options);
  }
}

/** Fastify's childLoggerFactory for LazyRequestLogger. */
export function lazyRequestLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new LazyRequestLogger(logger, bindings, options);
}
