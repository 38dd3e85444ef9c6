/**
 * The web playground end to end in Debian's Chromium: generate and stop, build an index from files,
 * ask with cited sources, delete; on a phone-sized screen; with API keys on. Screenshots for the
 * README go to docs/img/.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { testModelName } from "../helpers/env.js";
import {
  gateBrowserTests,
  openPlayground,
  SCREENSHOT_DIR,
  startPlaygroundApps,
  watchPage,
  type Browser,
  type PageWatch,
  type PlaygroundApps,
} from "../helpers/browser.js";

// Functions given to page.evaluate run in Chromium. The project compiles without TypeScript's DOM
// library (it clashes with Node's types), so here is the little of the DOM they use.
interface PageElement {
  id: string;
  textContent: string | null;
  dataset: Record<string, string | undefined>;
  matches(selector: string): boolean;
  blur(): void;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
  activeElement: PageElement | null;
  documentElement: { scrollWidth: number };
};
declare const window: {
  scrollTo(x: number, y: number): void;
  innerWidth: number;
  /** Left by the tests: text lengths seen while streaming, and the build phases shown. */
  __updates: Update[];
  __phases: string[];
};
declare class MutationObserver {
  constructor(callback: () => void);
  observe(
    target: PageElement,
    options: { childList?: boolean; characterData?: boolean; subtree?: boolean },
  ): void;
}
declare class DataTransfer {
  items: { add(file: File): void };
}
interface Update {
  length: number;
  state: string | undefined;
}

const skip = gateBrowserTests("web playground in Chromium");

const FIXTURES: Record<string, string> = {
  "birds.txt":
    "Bird migration\n\n" +
    "Many birds migrate south in winter to find food, because insects and seeds are scarce in the cold. " +
    "Swallows fly thousands of kilometres to Africa and return in spring to nest under the same roof. " +
    "Geese migrate in a V formation, which saves energy for the birds that follow the leader.",
  "handbook.md":
    "# Lectern handbook\n\n" +
    "## Backups\n\n" +
    "Back up the data folder every night: the file lectern.db holds every index and document. " +
    "A backup taken while the server runs is consistent, because the store writes through SQLite transactions.\n\n" +
    "## Moving to a new server\n\n" +
    "To migrate Lectern to a new machine, stop the server and copy the data folder; in winter, when traffic is low, is a good time.",
  "lighthouse.html":
    "<!doctype html><html><head><title>Lighthouse keeping</title><script>var tracking = 1;</script></head>" +
    "<body><nav>Home | About | Contact</nav><h1>Lighthouse keeping</h1>" +
    "<p>The keeper lights the lamp at dusk and trims the wick at midnight so the beam stays bright.</p>" +
    "<p>In winter fog the keeper sounds the horn every thirty seconds to warn passing ships.</p></body></html>",
};

/** The text of the first element matching `selector` ("" when it has none). */
async function text(page: Page, selector: string): Promise<string> {
  return (await page.textContent(selector)) ?? "";
}

/**
 * A screenshot for the README: no focus ring on a form field, from the top unless fullPage, and only
 * once both services' status has been checked (not "checking…").
 */
async function snap(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<void> {
  await page.waitForFunction(() =>
    [...document.querySelectorAll(".service")].every((item) => item.dataset.state !== "unknown"),
  );
  await page.evaluate((fullPage) => {
    const active = document.activeElement;
    if (active?.matches("input, textarea, select, button")) active.blur();
    if (!fullPage) window.scrollTo(0, 0);
  }, options.fullPage ?? false);
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, name), fullPage: options.fullPage ?? false });
}

/** Starts recording the length of `selector`'s text at every change, with `stateOf`'s data-state. */
async function recordUpdates(page: Page, selector: string, stateOf: string): Promise<void> {
  await page.evaluate(
    ([target, stateSelector]) => {
      const node = document.querySelector(target)!;
      const stateNode = document.querySelector(stateSelector)!;
      const log: Array<{ length: number; state: string | undefined }> = [];
      window.__updates = log;
      new MutationObserver(() =>
        log.push({ length: node.textContent!.length, state: stateNode.dataset.state }),
      ).observe(node, { childList: true, characterData: true, subtree: true });
    },
    [selector, stateOf] as const,
  );
}

/** Distinct non-empty text lengths seen while the text was still streaming. */
async function streamingUpdates(page: Page): Promise<number> {
  const log = await page.evaluate(() => window.__updates);
  return new Set(log.filter((entry) => entry.state === "streaming" && entry.length > 0).map((e) => e.length))
    .size;
}

describe("web playground in Chromium", { skip, timeout: 300_000 }, () => {
  let apps: PlaygroundApps;
  let browser: Browser;
  let page: Page;
  let watch: PageWatch;
  let fixtureDir: string;
  const started = performance.now();

  before(async () => {
    fixtureDir = mkdtempSync(path.join(os.tmpdir(), "lectern-web-files-"));
    for (const [name, text] of Object.entries(FIXTURES)) writeFileSync(path.join(fixtureDir, name), text);
    mkdirSync(SCREENSHOT_DIR, { recursive: true });
    ({ apps, browser, page, watch } = await openPlayground());
    page.on("dialog", (dialog) => void dialog.accept());
  });

  after(async () => {
    await browser?.close();
    await apps?.close();
    if (fixtureDir) rmSync(fixtureDir, { recursive: true, force: true });
    console.log(`# browser suite: ${Math.round(performance.now() - started)} ms`);
  });

  it("loads from the text generation app and finds both services", async () => {
    await page.goto(`${apps.textgenUrl}/ui/`);
    await page.waitForSelector("body[data-ready=true]");
    assert.equal(await page.getAttribute("#svc-textgen", "data-state"), "ok");
    assert.equal(await page.getAttribute("#svc-rag", "data-state"), "ok");
    assert.match(await text(page, "#svc-textgen .service-detail"), new RegExp(testModelName));
    assert.equal(await page.isVisible("#auth-banner"), false);
    // Every form control has a label (or an accessible name) the browser knows about.
    const unlabelled = await page.$$eval("input, select, textarea", (controls) =>
      controls
        .filter(
          (c) =>
            (c as unknown as { labels: unknown[] | null }).labels?.length === 0 &&
            !c.getAttribute("aria-label"),
        )
        .map((c) => c.id || c.outerHTML),
    );
    assert.deepEqual(unlabelled, []);
  });

  it("switches sections from the keyboard", async () => {
    await page.focus("#tab-generate");
    await page.keyboard.press("ArrowRight");
    assert.equal(await page.getAttribute("#tab-indices", "aria-selected"), "true");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "tab-indices");
    assert.equal(await page.isVisible("#panel-indices"), true);
    await page.keyboard.press("End");
    assert.equal(await page.isVisible("#panel-chat"), true);
    assert.match(page.url(), /#chat$/);
    await page.keyboard.press("Home");
    assert.equal(await page.isVisible("#panel-generate"), true);
    assert.equal(await page.isVisible("#panel-ask"), false);
    // Tab from the selected tab lands in the panel's first field.
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "prompt");
  });

  it("streams generated text into the output (Ctrl+Enter) and reports the finish", async () => {
    await page.fill("#prompt", "Once upon a time");
    await page.fill("#max-length", "80");
    await page.fill("#temperature", "0.7");
    await page.fill("#seed", "7");
    await recordUpdates(page, "#generate-output .generated", "#generate-output");
    await page.focus("#prompt");
    await page.keyboard.press("Control+Enter");
    await page.waitForSelector("#generate-output[data-state=done]", { timeout: 60_000 });
    // Tokens are shown as their events are read, before the "done" event ends the stream. How many
    // steps that takes depends on how the network hands the bytes over (on a loaded machine the tiny
    // model's whole stream can arrive in one read), so one step is the bar; the Stop test below sees a
    // generation part-way through.
    const updates = await streamingUpdates(page);
    assert.ok(updates >= 1, `the output changed ${updates} times while streaming`);
    assert.ok((await text(page, "#generate-output .generated")).length > 0);
    assert.equal(await text(page, "[data-stat=tokens]"), "80");
    assert.equal(await text(page, "[data-stat=finish]"), "length");
    assert.match(await text(page, "[data-stat=elapsed]"), /\d+(\.\d+)? m?s/);
    assert.match(await text(page, "#generate-status"), /Done: 80 tokens, finish reason “length”/);
    assert.equal(await page.getAttribute("#generate-output", "aria-busy"), "false");
    await snap(page, "ui-generate.png");
  });

  it("stops a running generation with the Stop button", async () => {
    // The tiny model writes its 2000 tokens in about a second, so on a loaded machine the whole stream
    // could arrive before the click does. Chromium's network throttling (DevTools protocol) hands the
    // page the stream at 1 kB/s, about two minutes for 2000 token events, so the click always lands
    // part-way through, whatever the load: no timing window.
    const devtools = await page.context().newCDPSession(page);
    await devtools.send("Network.enable");
    await devtools.send("Network.emulateNetworkConditions", {
      offline: false,
      latency: 0,
      downloadThroughput: 1000,
      uploadThroughput: -1,
    });
    try {
      await page.fill("#max-length", "2000");
      await page.fill("#seed", "");
      await page.click("#generate-button");
      await page.waitForFunction(
        () => (document.querySelector("#generate-output .generated")?.textContent?.length ?? 0) > 0,
        undefined,
        { timeout: 60_000 },
      );
      assert.equal(await page.isEnabled("#generate-stop"), true);
      assert.equal(await page.isEnabled("#generate-button"), false);
      await page.click("#generate-stop");
      await page.waitForSelector("#generate-output[data-state=stopped]", { timeout: 60_000 });
    } finally {
      await devtools.send("Network.emulateNetworkConditions", {
        offline: false,
        latency: 0,
        downloadThroughput: -1,
        uploadThroughput: -1,
      });
      await devtools.detach();
    }
    assert.equal(await text(page, "[data-stat=finish]"), "stopped");
    const tokens = Number((await text(page, "[data-stat=tokens]"))!.replace(/\D/g, ""));
    assert.ok(tokens > 0 && tokens < 2000, `stopped after ${tokens} tokens`);
    assert.match(await text(page, "#generate-status"), /Stopped after \d+ tokens/);
    assert.equal(await page.isEnabled("#generate-button"), true);
  });

  it("constrains the output with the JSON schema box and shows tool calls", async () => {
    await page.fill("#prompt", "Describe a girl.");
    await page.fill("#max-length", "120");
    await page.fill("#temperature", "0");
    await page.fill("#seed", "");
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 10 },
        age: { type: "integer", minimum: 1, maximum: 9 },
      },
    };
    await page.fill("#json-schema", JSON.stringify(schema));
    await page.click("#generate-button");
    await page.waitForSelector("#generate-output[data-state=done]", { timeout: 20_000 });
    const value = JSON.parse(await text(page, "#generate-output .generated")) as Record<string, unknown>;
    assert.deepEqual(Object.keys(value), ["name", "age"]);
    assert.equal(await page.isVisible("#tool-calls"), false);

    await page.fill("#json-schema", "");
    const weather = {
      type: "function",
      function: {
        name: "get_weather",
        parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } } },
      },
    };
    await page.fill("#tools", JSON.stringify([weather]));
    await page.selectOption("#tool-choice", "required");
    await page.click("#generate-button");
    await page.waitForSelector("#generate-output[data-state=done]", { timeout: 20_000 });
    assert.equal(await page.isVisible("#tool-calls"), true);
    assert.equal(await text(page, "#tool-calls .tool-name"), "get_weather");
    assert.deepEqual(Object.keys(JSON.parse(await text(page, "#tool-calls pre")) as object), ["city"]);
    assert.equal(await text(page, "[data-stat=finish]"), "tool_calls");
    await snap(page, "ui-tool-call.png");

    await page.fill("#tools", "");
    await page.fill("#json-schema", "{not json");
    await page.click("#generate-button");
    assert.match(await text(page, "#generate-status"), /The JSON schema is not valid JSON/);
    await page.fill("#json-schema", "");
  });

  it("builds an index from dropped and chosen files, with upload progress, and lists it", async () => {
    await page.click("#tab-indices");
    // One file dragged and dropped onto the zone, two chosen with the file input.
    const dataTransfer = await page.evaluateHandle((text) => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([text], "birds.txt", { type: "text/plain" }));
      return transfer;
    }, FIXTURES["birds.txt"]!);
    await page.dispatchEvent("#drop-zone", "dragenter", { dataTransfer });
    assert.equal(await page.getAttribute("#drop-zone", "class"), "drop-zone dragging");
    await page.dispatchEvent("#drop-zone", "drop", { dataTransfer });
    await page.setInputFiles("#files", [
      path.join(fixtureDir, "handbook.md"),
      path.join(fixtureDir, "lighthouse.html"),
    ]);
    assert.deepEqual(await page.$$eval("#file-list .file-name", (nodes) => nodes.map((n) => n.textContent)), [
      "birds.txt",
      "handbook.md",
      "lighthouse.html",
    ]);
    // The name is suggested from the first file; the user picks another.
    assert.equal(await page.inputValue("#index-name"), "birds");
    await page.fill("#index-name", "field-notes");
    await page.selectOption("#scorer", "bm25");
    await page.fill("#chunk-size", "300");
    await page.evaluate(() => {
      const phases: string[] = [];
      window.__phases = phases;
      const phase = document.querySelector("#build-phase")!;
      new MutationObserver(() => phases.push(phase.textContent!)).observe(phase, {
        childList: true,
        characterData: true,
        subtree: true,
      });
    });
    await page.click("#build-button");
    await page.waitForSelector("#build-status[data-kind]", { timeout: 60_000 });
    const status = await text(page, "#build-status");
    assert.match(status, /Built “field-notes”: 3 documents, \d+ chunks/);
    const phases = await page.evaluate(() => window.__phases);
    assert.ok(phases.includes("Indexing…"), `phases seen: ${phases.join(", ")}`);
    assert.equal(await page.isVisible("#build-progress"), false);
    assert.equal(await page.$$eval("#file-list li", (items) => items.length), 0);

    const row = page.locator('#indices-table tr[data-index="field-notes"]');
    await row.waitFor();
    const cells = await row.locator("td").allTextContents();
    assert.equal(cells[0], "BM25");
    assert.equal(cells[1], "3");
    assert.ok(Number(cells[2]) >= 3, `chunks: ${cells[2]}`);
    await snap(page, "ui-index.png");
  });

  it("answers a question with the cited source highlighted", async () => {
    await ensureIndex(apps);
    await page.click("#tab-ask");
    await page.waitForSelector('#ask-index option[value="field-notes"]', { state: "attached" });
    await page.selectOption("#ask-index", "field-notes");
    await page.selectOption("#answer-mode", "extractive");
    await page.fill("#question", "Why do birds migrate in winter?");
    await page.press("#question", "Enter");
    await page.waitForSelector("#answer-text[data-state=done]");

    assert.equal(await page.getAttribute("#source-1", "data-file"), "birds.txt");
    assert.match(await text(page, "#answer-text"), /migrate south in winter/);
    assert.match(await text(page, "#answer-mode-badge"), /extractive/);
    // Query terms are marked in the source cards.
    const marks = await page.$$eval("#source-1 mark", (nodes) =>
      nodes.map((n) => n.textContent!.toLowerCase()),
    );
    assert.ok(marks.includes("migrate") && marks.includes("winter"), `marked: ${marks.join(", ")}`);

    const citation = page.locator("#answer-text a.cite").first();
    assert.equal(await citation.textContent(), "1");
    assert.ok(await page.locator("#source-1").evaluate((card) => card.classList.contains("cited")));
    await citation.click();
    await page.waitForSelector("#source-1.active");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "source-1");
    assert.ok(await page.locator("#source-1").isVisible());
    assert.match(page.url(), /#ask$/, "the citation link leaves the URL on the Ask tab");
    // Keyboard: a citation is a link, so Tab reaches it and Enter follows it.
    await citation.focus();
    await page.keyboard.press("Enter");
    assert.ok(await page.locator("#source-1").evaluate((card) => card.classList.contains("active")));
    await snap(page, "ui-ask.png", { fullPage: true });
  });

  it("streams a generative answer after showing the results", async () => {
    await page.selectOption("#answer-mode", "generative");
    await page.fill("#ask-top-k", "2");
    await page.fill("#question", "What does the keeper do at dusk?");
    await recordUpdates(page, "#answer-text", "#answer-text");
    await page.click("#ask-button");
    await page.waitForSelector("#answer-text[data-state=done]", { timeout: 60_000 });
    assert.equal(await page.getAttribute("#source-1", "data-file"), "lighthouse.html");
    assert.match(await text(page, "#answer-mode-badge"), /generative/);
    assert.match(await text(page, "#answer-note"), new RegExp(`Written by ${testModelName}`));
    assert.ok((await text(page, "#answer-text")).trim().length > 0, "an answer was written");
    const updates = await streamingUpdates(page);
    assert.ok(updates >= 1, `the answer changed ${updates} times while streaming`);
  });

  it("is readable on a phone (served by the RAG app)", async () => {
    const phone = await browser.context.newPage();
    const phoneWatch = watchPage(phone);
    try {
      await phone.setViewportSize({ width: 390, height: 844 });
      await phone.goto(`${apps.ragUrl}/ui/#ask`);
      await phone.waitForSelector("body[data-ready=true]");
      assert.equal(await phone.getAttribute("#svc-textgen", "data-state"), "ok", "reaches the sibling app");
      await phone.selectOption("#ask-index", "field-notes");
      await phone.fill("#question", "How do I back up the data?");
      await phone.press("#question", "Enter");
      await phone.waitForSelector("#answer-text[data-state=done]");
      assert.equal(await phone.getAttribute("#source-1", "data-file"), "handbook.md");
      const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `the page is ${overflow}px wider than the phone`);
      // One column: the form fields are stacked, as wide as the form.
      const widths = await phone.$$eval(["#question", "#ask-index"].join(","), (nodes) =>
        nodes.map((n) => n.getBoundingClientRect().width),
      );
      assert.ok(Math.abs(widths[0]! - widths[1]!) < 2, `field widths ${widths.join(", ")}`);
      await snap(phone, "ui-phone.png");
      // The indices table turns into cards on a phone.
      await phone.click("#tab-indices");
      await phone.locator('#indices-table tr[data-index="field-notes"]').waitFor();
      const overflowIndices = await phone.evaluate(
        () => document.documentElement.scrollWidth - window.innerWidth,
      );
      assert.ok(overflowIndices <= 0, `the indices tab is ${overflowIndices}px wider than the phone`);
    } finally {
      await phone.close();
    }
    assert.deepEqual(phoneWatch.errors, []);
    watch.requests.push(...phoneWatch.requests);
  });

  it("deletes an index after confirming", async () => {
    await page.click("#tab-indices");
    const row = page.locator('#indices-table tr[data-index="field-notes"]');
    await row.waitFor();
    await page.click('button[aria-label="Delete field-notes"]');
    await row.waitFor({ state: "detached" });
    assert.match(await text(page, "#indices-status"), /Deleted “field-notes”/);
    assert.equal(await page.isVisible("#indices-empty"), true);
    const listed = (await (await fetch(`${apps.ragUrl}/rag/indices`)).json()) as { count: number };
    assert.equal(listed.count, 0);
  });

  describe("with API keys on", () => {
    let keyed: PlaygroundApps;
    let keyedPage: Page;
    let keyedWatch: PageWatch;
    const KEY = "playground-key-1";

    before(async () => {
      const keysFile = path.join(fixtureDir, "keys.txt");
      writeFileSync(keysFile, `${KEY} acme\n`);
      // Its text generation app serves from the first one (no second model to load).
      keyed = await startPlaygroundApps({
        env: { API_KEYS_FILE: keysFile },
        textgenEnv: { GENERATION_UPSTREAM_URL: `${apps.textgenUrl}/v1` },
        generation: false,
      });
      keyedPage = await browser.context.newPage();
      keyedWatch = watchPage(keyedPage);
    });

    after(async () => {
      await keyedPage?.close();
      await keyed?.close();
    });

    it("asks for a key, keeps it in the browser, and sends it to both apps", async () => {
      await keyedPage.goto(`${keyed.textgenUrl}/ui/#indices`);
      await keyedPage.waitForSelector("body[data-ready=true]");
      assert.equal(await keyedPage.isVisible("#auth-banner"), true);
      assert.equal(await keyedPage.evaluate(() => document.activeElement?.id), "api-key");
      assert.equal(await keyedPage.getAttribute("#api-key", "placeholder"), "required");
      // The RAG app (another origin) refused the listing, and the page says why.
      assert.match(await text(keyedPage, "#indices-status"), /API key/);

      await keyedPage.fill("#api-key", KEY);
      await keyedPage.press("#api-key", "Tab");
      await keyedPage.waitForSelector("#indices-empty:not([hidden])");
      assert.equal(await keyedPage.isVisible("#auth-banner"), false);
      assert.equal(await text(keyedPage, "#indices-status"), "");

      // A reload keeps the key (localStorage): building from a file goes to the RAG app with it.
      await keyedPage.reload();
      await keyedPage.waitForSelector("body[data-ready=true]");
      assert.equal(await keyedPage.inputValue("#api-key"), KEY);
      assert.equal(await keyedPage.isVisible("#auth-banner"), false);
      await keyedPage.setInputFiles("#files", path.join(fixtureDir, "birds.txt"));
      await keyedPage.fill("#index-name", "acme-notes");
      await keyedPage.click("#build-button");
      await keyedPage.waitForSelector("#build-status[data-kind]", { timeout: 60_000 });
      assert.match(await text(keyedPage, "#build-status"), /Built “acme-notes”: 1 document,/);
      await keyedPage.locator('#indices-table tr[data-index="acme-notes"]').waitFor();
      const listed = await fetch(`${keyed.ragUrl}/rag/indices`, {
        headers: { authorization: `Bearer ${KEY}` },
      });
      const body = (await listed.json()) as { indices: Array<{ name: string; tenant_id: string }> };
      assert.deepEqual(
        body.indices.map((index) => [index.name, index.tenant_id]),
        [["acme-notes", "acme"]],
      );

      // Generation on this page's own app needs the key too.
      await keyedPage.click("#tab-generate");
      await keyedPage.fill("#max-length", "8");
      await keyedPage.click("#generate-button");
      await keyedPage.waitForSelector("#generate-output[data-state=done]", { timeout: 60_000 });

      const unexpected = keyedWatch.errors.filter((error) => !/status of 401/.test(error));
      assert.deepEqual(unexpected, []);
      assert.deepEqual(
        keyedWatch.requests.filter((url) => !url.startsWith("http://127.0.0.1:")),
        [],
      );
    });
  });

  it("made no request beyond 127.0.0.1 and logged no errors", () => {
    assert.ok(watch.requests.length > 10);
    const outside = watch.requests.filter((url) => !url.startsWith("http://127.0.0.1:"));
    assert.deepEqual(outside, []);
    assert.deepEqual(watch.errors, []);
  });
});

/** The index the later tests ask, built through the API when the upload test could not build it. */
async function ensureIndex(apps: PlaygroundApps): Promise<void> {
  const listed = (await (await fetch(`${apps.ragUrl}/rag/indices`)).json()) as {
    indices: Array<{ name: string }>;
  };
  if (listed.indices.some((index) => index.name === "field-notes")) return;
  const response = await fetch(`${apps.ragUrl}/rag/build`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      index_name: "field-notes",
      scorer: "bm25",
      chunk_size: 300,
      documents: [
        { id: "birds.txt", title: "Bird migration", text: FIXTURES["birds.txt"] },
        { id: "handbook.md", title: "Lectern handbook", text: FIXTURES["handbook.md"] },
        {
          id: "lighthouse.html",
          title: "Lighthouse keeping",
          text: "The keeper lights the lamp at dusk and trims the wick at midnight so the beam stays bright. In winter fog the keeper sounds the horn every thirty seconds to warn passing ships.",
        },
      ],
    }),
  });
  assert.equal(response.status, 201, await response.text());
}
