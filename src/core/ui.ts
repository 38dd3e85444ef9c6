/**
 * The web playground (web/) at /ui, served by both apps from files in this repo: no CDN, works
 * offline. `/ui/config.json` tells the page where each app is, so one page drives both, and the rules
 * the page checks before sending (the name pattern; the RAG app adds the file formats it reads), so
 * the page never keeps copies of them.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import type { Config } from "./config.js";
import { NAME_PATTERN, NAME_RULE } from "./validation.js";

export const WEB_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../web");

export interface UiOptions {
  service: "textgen" | "rag";
  /** The app's own fields of config.json (the RAG app's `formats`). */
  appConfig?: Record<string, unknown>;
  config: {
    server: Pick<Config["server"], "textgenPort" | "ragPort">;
    auth: Pick<Config["auth"], "apiKeysFile">;
  };
}

export async function registerUi(app: FastifyInstance, options: UiOptions): Promise<void> {
  await app.register(fastifyStatic, {
    root: WEB_ROOT,
    prefix: "/ui/",
    decorateReply: false,
    index: ["index.html"],
    // Pages change with the code; let browsers revalidate rather than serve a stale playground.
    cacheControl: true,
    maxAge: 0,
  });
  app.get("/ui", { schema: { hide: true } }, async (_request, reply) => reply.redirect("/ui/", 302));
  app.get("/ui/config.json", { schema: { hide: true } }, async (request) => {
    // The sibling app is on the same host name as this page, on its own port.
    const host = (request.headers.host ?? "127.0.0.1").replace(/:\d+$/, "");
    const origin = (port: number) => `${request.protocol}://${host}:${port}`;
    return {
      service: options.service,
      textgen_url: options.service === "textgen" ? "" : origin(options.config.server.textgenPort),
      rag_url: options.service === "rag" ? "" : origin(options.config.server.ragPort),
      auth: options.config.auth.apiKeysFile !== null,
      name_pattern: NAME_PATTERN,
      name_rule: NAME_RULE,
      ...options.appConfig,
    };
  });
}
