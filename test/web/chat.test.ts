/**
 * The playground's Chat tab in Debian's Chromium: a multi-turn conversation streamed from the text
 * generation app, Markdown from the model rendered without HTML injection, answers from an index with
 * their sources, Stop, a new conversation, and a phone-sized screen. Screenshots for the README go to
 * LECTERN_SCREENSHOT_DIR (docs/img to refresh them).
 */
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page, Request } from "playwright-core";
import {
  gateBrowserTests,
  openPlayground,
  SCREENSHOT_DIR,
  watchPage,
  type Browser,
  type PageWatch,
  type PlaygroundApps,
} from "../helpers/browser.js";

// Functions given to page.evaluate run in Chromium; the project compiles without the DOM library.
interface PageElement {
  textContent: string | null;
  dataset: Record<string, string | undefined>;
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
  getAttribute(name: string): string | null;
  blur(): void;
  scrollIntoView(options: { block: string }): void;
  matches(selector: string): boolean;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement> & { length: number };
  createElement(tag: string): PageElement;
  activeElement: PageElement | null;
  documentElement: { scrollWidth: number };
};
declare const window: {
  innerWidth: number;
  scrollTo(x: number, y: number): void;
  __chatUpdates: Array<{ length: number; state: string | undefined }>;
};
declare class MutationObserver {
  constructor(callback: () => void);
  observe(
    target: PageElement,
    options: { childList?: boolean; characterData?: boolean; subtree?: boolean },
  ): void;
}

const skip = gateBrowserTests("the playground's Chat tab in Chromium");

const DOCUMENTS = [
  {
    id: "lighthouse.md",
    title: "Lighthouse keeping",
    text:
      "The keeper lights the lamp at dusk and trims the wick at midnight so the beam stays bright. " +
      "In winter fog the keeper sounds the horn every thirty seconds to warn passing ships.",
  },
  {
    id: "birds.md",
    title: "Bird migration",
    text:
      "Many birds migrate south in winter to find food. Swallows fly thousands of kilometres to Africa " +
      "and return in spring to nest under the same roof.",
  },
];

/** The chat requests the page sent, with their JSON bodies. */
function chatRequests(requests: Request[], pathname: string): Array<Record<string, unknown>> {
  return requests
    .filter((request) => request.method() === "POST" && new URL(request.url()).pathname === pathname)
    .map((request) => JSON.parse(request.postData() ?? "{}") as Record<string, unknown>);
}

/** Sends a message from the chat box with Enter and waits until the answer is no longer streaming. */
async function sendAndWait(page: Page, message: string): Promise<void> {
  const before = await page.locator("#chat-log .msg-assistant").count();
  await page.fill("#chat-input", message);
  await page.press("#chat-input", "Enter");
  const answer = page.locator("#chat-log .msg-assistant").nth(before);
  await answer.waitFor();
  await page.waitForFunction(
    (n) => {
      const items = [...document.querySelectorAll("#chat-log .msg-assistant")];
      const state = items[n]?.dataset.state;
      return state === "done" || state === "error" || state === "stopped";
    },
    before,
    { timeout: 120_000 },
  );
}

/** Starts recording the length of the newest answer's text at every change, with its state. */
async function recordUpdates(page: Page): Promise<void> {
  await page.evaluate(() => {
    const log = document.querySelector("#chat-log")!;
    window.__chatUpdates = [];
    new MutationObserver(() => {
      const answers = [...log.querySelectorAll(".msg-assistant")];
      const last = answers[answers.length - 1];
      if (!last) return;
      window.__chatUpdates.push({
        length: last.querySelector(".msg-body")?.textContent?.length ?? 0,
        state: last.dataset.state,
      });
    }).observe(log, { childList: true, characterData: true, subtree: true });
  });
}

async function streamingUpdates(page: Page): Promise<number> {
  const log = await page.evaluate(() => window.__chatUpdates);
  return new Set(log.filter((entry) => entry.state === "streaming" && entry.length > 0).map((e) => e.length))
    .size;
}

/**
 * A screenshot for the README of the screen as it is (not the full page: the message box sticks to the
 * bottom of the screen, and a full-page shot would draw it over the conversation), with the newest
 * question at the top when `toQuestion`, else from the top of the page.
 */
async function snap(page: Page, name: string, options: { toQuestion?: boolean } = {}): Promise<void> {
  await page.waitForFunction(() =>
    [...document.querySelectorAll(".service")].every((item) => item.dataset.state !== "unknown"),
  );
  await page.evaluate((toQuestion) => {
    const active = document.activeElement;
    if (active?.matches("input, textarea, select, button")) active.blur();
    const questions = [...document.querySelectorAll("#chat-log .msg-user")];
    const last = questions[questions.length - 1];
    if (toQuestion && last) last.scrollIntoView({ block: "start" });
    else window.scrollTo(0, 0);
  }, options.toQuestion ?? false);
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, name) });
}

describe("the playground's Chat tab in Chromium", { skip, timeout: 300_000 }, () => {
  let apps: PlaygroundApps;
  let browser: Browser;
  let page: Page;
  let watch: PageWatch;
  const sent: Request[] = [];
  let ragChatRoute = false;

  before(async () => {
    mkdirSync(SCREENSHOT_DIR, { recursive: true });
    ({ apps, browser, page, watch } = await openPlayground());
    const built = await fetch(`${apps.ragUrl}/rag/build`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ index_name: "keepers", documents: DOCUMENTS }),
    });
    assert.ok(built.ok, await built.text());
    // /rag/chat comes with the conversations work; before it, the page falls back to /rag/query.
    const openapi = (await (await fetch(`${apps.ragUrl}/openapi.json`)).json()) as {
      paths: Record<string, unknown>;
    };
    ragChatRoute = "/rag/chat" in openapi.paths;
    page.on("request", (request) => sent.push(request));
  });

  after(async () => {
    await browser?.close();
    await apps?.close();
  });

  it("opens on #chat with the model picker filled from /v1/models", async () => {
    await page.goto(`${apps.textgenUrl}/ui/#chat`);
    await page.waitForSelector("body[data-ready=true]");
    assert.equal(await page.isVisible("#panel-chat"), true);
    const models = (await (await fetch(`${apps.textgenUrl}/v1/models`)).json()) as {
      data: Array<{ id: string }>;
    };
    await page.waitForFunction(
      (id) =>
        [...document.querySelectorAll("#chat-model option")].some((o) => o.getAttribute("value") === id),
      models.data[0]!.id,
    );
    const indexOptions = await page.$$eval("#chat-index option", (options) =>
      options.map((o) => o.getAttribute("value")),
    );
    assert.deepEqual(indexOptions, ["", "keepers"]);
  });

  it("streams a plain chat and sends the whole conversation on the second turn", async () => {
    await recordUpdates(page);
    await sendAndWait(page, "Tell me a story about a cat.");
    assert.equal(await page.getAttribute("#chat-log .msg-assistant >> nth=0", "data-state"), "done");
    assert.ok((await page.textContent("#chat-log .msg-assistant .msg-body"))!.trim().length > 0);
    const updates = await streamingUpdates(page);
    assert.ok(updates >= 1, `the answer changed ${updates} times while streaming`);

    await sendAndWait(page, "And then what happened?");
    const bodies = chatRequests(sent, "/v1/chat/completions");
    assert.equal(bodies.length, 2);
    const second = bodies[1]!.messages as Array<{ role: string; content: string }>;
    assert.deepEqual(
      second.map((m) => m.role),
      ["user", "assistant", "user"],
    );
    assert.equal(second[0]!.content, "Tell me a story about a cat.");
    assert.equal(second[2]!.content, "And then what happened?");
    assert.equal(bodies[1]!.stream, true);
    assert.equal(await page.locator("#chat-log .msg-user").count(), 2);
  });

  it("renders Markdown from model text as DOM nodes, never as HTML", async () => {
    const result = await page.evaluate(async () => {
      const { renderMarkdown } = (await import("/ui/js/markdown.js" as string)) as {
        renderMarkdown(target: PageElement, text: string): void;
      };
      const target = document.createElement("div");
      renderMarkdown(
        target,
        "Hello <img src=x onerror=alert(1)> **bold** and *em* `a<b`\n\n" +
          "- one\n- [two](https://example.org/x)\n- [bad](javascript:alert(1))\n\n" +
          "```js\n<script>alert(1)</script>\n```\n\n1. first\n2. second",
      );
      // No helper functions in here: tsx names them with a helper that does not exist in the page.
      return {
        imgs: [...target.querySelectorAll("img")].length,
        scripts: [...target.querySelectorAll("script")].length,
        strong: [...target.querySelectorAll("strong")].map((n) => n.textContent),
        em: [...target.querySelectorAll("em")].map((n) => n.textContent),
        code: [...target.querySelectorAll("p code")].map((n) => n.textContent),
        links: [...target.querySelectorAll("a")].map((n) => n.getAttribute("href")),
        items: [...target.querySelectorAll("ul li")].length,
        ordered: [...target.querySelectorAll("ol li")].length,
        pre: [...target.querySelectorAll("pre code")].map((n) => n.textContent),
        text: target.textContent,
      };
    });
    assert.equal(result.imgs, 0);
    assert.equal(result.scripts, 0);
    assert.deepEqual(result.strong, ["bold"]);
    assert.deepEqual(result.em, ["em"]);
    assert.deepEqual(result.code, ["a<b"]);
    assert.deepEqual(result.links, ["https://example.org/x"]);
    assert.equal(result.items, 3);
    assert.equal(result.ordered, 2);
    assert.deepEqual(result.pre, ["<script>alert(1)</script>"]);
    assert.match(result.text ?? "", /<img src=x onerror=alert\(1\)>/);
    assert.match(result.text ?? "", /\[bad\]\(javascript:alert\(1\)\)/);
    // Citations in range become what `cite` makes; others stay text. (A string, so that tsx adds
    // nothing to the callback that the page lacks.)
    const cited = (await page.evaluate(`(async () => {
      const { renderMarkdown } = await import("/ui/js/markdown.js");
      const node = document.createElement("p");
      renderMarkdown(node, "See [1] and [2, 3] but not [9].", {
        cite(numbers) {
          if (numbers.some((n) => n > 3)) return null;
          const link = document.createElement("a");
          link.textContent = numbers.join("+");
          return link;
        },
      });
      return { links: [...node.querySelectorAll("a")].map((n) => n.textContent), text: node.textContent };
    })()`)) as { links: string[]; text: string };
    assert.deepEqual(cited.links, ["1", "2+3"]);
    assert.equal(cited.text, "See 1 and 2+3 but not [9].");
  });

  it("answers from an index with its sources and citations", async () => {
    await page.click("#chat-new");
    assert.equal(await page.locator("#chat-log .msg").count(), 0);
    await page.selectOption("#chat-index", "keepers");
    await sendAndWait(page, "How does the keeper warn ships in fog?");
    const answer = page.locator("#chat-log .msg-assistant").last();
    assert.equal(await answer.getAttribute("data-state"), "done");
    const files = await answer
      .locator(".msg-sources .card")
      .evaluateAll((cards) => cards.map((c) => c.getAttribute("data-file")));
    assert.ok(files.length >= 1, "sources are shown");
    assert.equal(files[0], "lighthouse.md");
    assert.match((await answer.locator(".msg-sources summary").textContent()) ?? "", /Sources \(\d+\)/);
    if (ragChatRoute) {
      // The conversation went to /rag/chat, and the page shows what was searched.
      const bodies = chatRequests(sent, "/rag/chat");
      assert.equal(bodies.length, 1);
      assert.equal(bodies[0]!.index ?? bodies[0]!.index_name, "keepers");
      assert.deepEqual(bodies[0]!.messages, [
        { role: "user", content: "How does the keeper warn ships in fog?" },
      ]);
      assert.ok((await answer.getAttribute("data-searched"))?.length, "the search query is shown");
      // A follow-up sends the whole conversation.
      await sendAndWait(page, "And at midnight?");
      const all = chatRequests(sent, "/rag/chat");
      const second = all[1]!.messages as Array<{ role: string }>;
      assert.deepEqual(
        second.map((m) => m.role),
        ["user", "assistant", "user"],
      );
      // What the follow-up found depends on how the test model condensed it: only that it finished.
      assert.equal(await page.locator("#chat-log .msg-assistant").last().getAttribute("data-state"), "done");
    } else {
      const bodies = chatRequests(sent, "/rag/query");
      assert.equal(bodies.length, 1);
      assert.equal(bodies[0]!.index_name, "keepers");
      assert.match((await answer.locator(".msg-note").textContent()) ?? "", /no \/rag\/chat/);
    }
    // A citation, when the answer has one, opens and marks its card.
    const cite = answer.locator("a.cite").first();
    if ((await cite.count()) > 0) {
      await cite.click();
      assert.equal(await answer.locator(".card.active").count(), 1);
    }
    // A screen tall enough for the whole answer and its source.
    await page.setViewportSize({ width: 1280, height: 1150 });
    await snap(page, "ui-chat.png");
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it("stops a streaming answer, keeps what was written, and starts a new conversation", async () => {
    await page.click("#chat-new");
    await page.selectOption("#chat-index", "");
    // A long answer (2,000 tokens, no early end) handed to the page at 1 kB/s by Chromium's network
    // throttling, so the Stop click lands part-way through whatever the machine's load: no timing window.
    await page.route("**/v1/chat/completions", async (route) => {
      const body = JSON.parse(route.request().postData() ?? "{}") as Record<string, unknown>;
      await route.continue({ postData: JSON.stringify({ ...body, max_tokens: 2000, ignore_eos: true }) });
    });
    const devtools = await page.context().newCDPSession(page);
    await devtools.send("Network.enable");
    await devtools.send("Network.emulateNetworkConditions", {
      offline: false,
      latency: 0,
      downloadThroughput: 1000,
      uploadThroughput: -1,
    });
    try {
      await page.fill("#chat-input", "Tell me a very long story.");
      await page.click("#chat-send");
      await page.waitForSelector("#chat-log .msg-assistant[data-state=streaming]", { timeout: 60_000 });
      assert.equal(await page.isEnabled("#chat-stop"), true);
      assert.equal(await page.isEnabled("#chat-send"), false);
      await page.click("#chat-stop");
      await page.waitForSelector("#chat-log .msg-assistant[data-state=stopped]", { timeout: 60_000 });
    } finally {
      await devtools.send("Network.emulateNetworkConditions", {
        offline: false,
        latency: 0,
        downloadThroughput: -1,
        uploadThroughput: -1,
      });
      await devtools.detach();
      await page.unroute("**/v1/chat/completions");
    }
    assert.match((await page.textContent("#chat-status")) ?? "", /Stopped/);
    assert.ok(
      (await page.textContent("#chat-log .msg-assistant .msg-body"))!.length > 0,
      "the partial answer stays",
    );
    assert.equal(await page.isEnabled("#chat-send"), true);
    await page.click("#chat-new");
    assert.equal(await page.locator("#chat-log .msg").count(), 0);
    assert.equal(await page.isVisible("#chat-empty"), true);
  });

  it("works on a phone (390 px wide, served by the RAG app)", async () => {
    const phone = await browser.context.newPage();
    const phoneWatch = watchPage(phone);
    try {
      await phone.setViewportSize({ width: 390, height: 844 });
      await phone.goto(`${apps.ragUrl}/ui/#chat`);
      await phone.waitForSelector("body[data-ready=true]");
      await phone.waitForFunction(() => document.querySelectorAll("#chat-index option").length > 1);
      await phone.selectOption("#chat-index", "keepers");
      await sendAndWait(phone, "When does the keeper trim the wick?");
      assert.ok((await phone.locator("#chat-log .msg-assistant .card").count()) >= 1);
      const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `the page is ${overflow}px wider than the phone`);
      const box = await phone.locator("#chat-input").boundingBox();
      assert.ok(box && box.width > 250, `the message box is ${box?.width}px wide`);
      await snap(phone, "ui-chat-phone.png", { toQuestion: true });
    } finally {
      await phone.close();
    }
    assert.deepEqual(phoneWatch.errors, []);
  });

  it("made no request beyond 127.0.0.1 and logged no errors", () => {
    const outside = sent.map((r) => r.url()).filter((url) => !url.startsWith("http://127.0.0.1:"));
    assert.deepEqual(outside, []);
    assert.deepEqual(watch.errors, []);
  });
});
