/**
 * Browser tests: Debian's Chromium driven by playwright-core (which downloads nothing), and both apps
 * on real sockets at known ports, so each app's /ui/config.json points at the other.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { it } from "node:test";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { buildRagApp } from "../../src/rag/app.js";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import { repoRoot, testConfig } from "./env.js";

export const CHROMIUM_PATH = process.env.LECTERN_CHROMIUM ?? "/usr/bin/chromium";

/**
 * Where the browser tests put their screenshots: a temporary folder, so test runs leave the checkout
 * clean; LECTERN_SCREENSHOT_DIR=docs/img refreshes the README's copies.
 */
export const SCREENSHOT_DIR = path.resolve(
  repoRoot,
  process.env.LECTERN_SCREENSHOT_DIR ?? path.join(os.tmpdir(), "lectern-screenshots"),
);

/** Why the browser tests cannot run here, or false when they can. */
export function browserSkipReason(): string | false {
  return existsSync(CHROMIUM_PATH)
    ? false
    : `Chromium not found at ${CHROMIUM_PATH}: install Debian's chromium package (apt-get install chromium) or set LECTERN_CHROMIUM to run the browser tests`;
}

/** Whether this run is CI's (CI=true, as CI services set it), where a missing browser is a failure. */
export function isCi(): boolean {
  const value = (process.env.CI ?? "").trim().toLowerCase();
  return value !== "" && value !== "false" && value !== "0";
}

/**
 * Gates a browser test file on Chromium. When it is missing, the file gets one test that says so: a
 * skipped test with the reason (counted in the summary's `# skipped`, so a run without a browser does
 * not look complete), or under CI=true a failing one (CI must not pass without its browser tests).
 * Returns the reason to skip the file's browser tests with, or false when they can run.
 */
export function gateBrowserTests(what: string): string | false {
  const reason = browserSkipReason();
  if (!reason) return false;
  if (isCi()) {
    it(`${what}: Chromium is required under CI=true`, () => {
      assert.fail(`CI=true, so the browser tests must run, but ${reason}`);
    });
  } else {
    it(`${what} (needs Chromium)`, { skip: reason }, () => undefined);
  }
  return reason;
}

/** Ports free right now, distinct from one another (held open together while they are picked). */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once("error", reject);
          server.listen({ host: "127.0.0.1", port: 0 }, () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

export interface PlaygroundApps {
  textgenUrl: string;
  ragUrl: string;
  dataDir: string;
  close(): Promise<void>;
}

export interface PlaygroundOptions {
  /** Environment for both apps (on top of the test configuration). */
  env?: Record<string, string>;
  /** Environment for the text generation app only, e.g. GENERATION_UPSTREAM_URL to load no model. */
  textgenEnv?: Record<string, string>;
  /** Environment for the RAG app only. */
  ragEnv?: Record<string, string>;
  /** Whether the RAG app writes generative answers with the text generation app (default true). */
  generation?: boolean;
}

/**
 * A text generation app (the test model) and a RAG app (fresh DATA_DIR, generative answers written by
 * that text generation app), each on its own port on 127.0.0.1 and knowing the other's port.
 */
export async function startPlaygroundApps(options: PlaygroundOptions = {}): Promise<PlaygroundApps> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options);
    } catch (error) {
      // Another process may take a port between picking and listening; pick again.
      if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE" || attempt >= 3) throw error;
    }
  }
}

async function startOnce(options: PlaygroundOptions): Promise<PlaygroundApps> {
  const [textgenPort, ragPort] = (await freePorts(2)) as [number, number];
  const ports = { TEXTGEN_PORT: String(textgenPort), RAG_PORT: String(ragPort) };
  const textgenUrl = `http://127.0.0.1:${textgenPort}`;
  const ragUrl = `http://127.0.0.1:${ragPort}`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lectern-web-"));

  // Two sequences of the 4,096-token context, so a generative answer's sources fit in one.
  const textgenConfig = testConfig({ MAX_CONCURRENT: "2", ...ports, ...options.env, ...options.textgenEnv });
  const generator = createGenerator(textgenConfig);
  const textgen = await buildTextgenApp({ config: textgenConfig, generator });
  let rag: Awaited<ReturnType<typeof buildRagApp>> | undefined;
  try {
    await textgen.listen({ host: "127.0.0.1", port: textgenPort });
    const generation: Record<string, string> =
      options.generation === false ? {} : { GENERATION_URL: `${textgenUrl}/v1` };
    rag = await buildRagApp({
      config: testConfig({ DATA_DIR: dataDir, ...generation, ...ports, ...options.env, ...options.ragEnv }),
    });
    await rag.listen({ host: "127.0.0.1", port: ragPort });
    if ("ready" in generator && typeof generator.ready === "function") await generator.ready();
  } catch (error) {
    await rag?.close().catch(() => undefined);
    await textgen.close().catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    textgenUrl,
    ragUrl,
    dataDir,
    async close() {
      await rag?.close().catch(() => undefined);
      await textgen.close().catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Headless Chromium with a fresh profile that is removed on close. */
export async function launchBrowser(
  options: { viewport?: { width: number; height: number } } = {},
): Promise<Browser> {
  const userDataDir = mkdtempSync(path.join(os.tmpdir(), "lectern-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
      "--disable-quic",
      "--disable-sync",
    ],
    viewport: options.viewport ?? { width: 1280, height: 900 },
    deviceScaleFactor: 1,
    reducedMotion: "reduce",
    colorScheme: "light",
    locale: "en-US",
    timezoneId: "UTC",
  });
  // A hang guard, not a latency target: CI is a loaded 2-core machine (a flaky test is a defect).
  context.setDefaultTimeout(60_000);
  return {
    context,
    async close() {
      await context.close().catch(() => undefined);
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

export interface Playground {
  apps: PlaygroundApps;
  browser: Browser;
  /** The browser's first page, watched. */
  page: Page;
  watch: PageWatch;
}

/** Both apps and Chromium, started together; what did start is closed again if the other fails. */
export async function openPlayground(options: PlaygroundOptions = {}): Promise<Playground> {
  const [apps, browser] = await Promise.allSettled([startPlaygroundApps(options), launchBrowser()]);
  if (apps.status === "rejected" || browser.status === "rejected") {
    if (browser.status === "fulfilled") await browser.value.close();
    if (apps.status === "fulfilled") await apps.value.close();
    throw apps.status === "rejected" ? apps.reason : (browser as PromiseRejectedResult).reason;
  }
  const { context } = browser.value;
  const page = context.pages()[0] ?? (await context.newPage());
  return { apps: apps.value, browser: browser.value, page, watch: watchPage(page) };
}

export interface PageWatch {
  /** Every URL the page requested, in order. */
  requests: string[];
  /** Console errors and uncaught page errors. */
  errors: string[];
}

/** Records what a page requests and every error it logs. */
export function watchPage(page: Page): PageWatch {
  const watch: PageWatch = { requests: [], errors: [] };
  page.on("request", (request) => watch.requests.push(request.url()));
  page.on("console", (message) => {
    if (message.type() === "error")
      watch.errors.push(`console: ${message.text()} (${message.location().url})`);
  });
  page.on("pageerror", (error) => watch.errors.push(`page error: ${error.message}`));
  return watch;
}
