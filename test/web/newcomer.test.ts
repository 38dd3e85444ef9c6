/**
 * What a newcomer met on the playground (issue #33), in Debian's Chromium: "Max new tokens" (and
 * Chat's length) bounded by the model's context as /v1/models reports it, refused on the page before
 * any request, with a model picker in Generate; JSON output not glued to the prompt; a tool call of
 * the last request cleared beside a new error; and on a 390 px phone, the sticky composer never
 * covering the end of the newest reply.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { testModelName } from "../helpers/env.js";
import { gateBrowserTests, openPlayground, watchPage, type Playground } from "../helpers/browser.js";

// Functions given to page.evaluate run in Chromium; the project compiles without the DOM library.
interface Box {
  top: number;
  bottom: number;
}
interface PageElement {
  getBoundingClientRect(): Box;
  dataset: Record<string, string | undefined>;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): ArrayLike<PageElement>;
  documentElement: { scrollHeight: number };
};
declare const window: { innerHeight: number };

const skip = gateBrowserTests("the playground's bounds and phone composer in Chromium");

/** The context per request of the test apps: LLAMA_CONTEXT_SIZE 4096 shared by MAX_CONCURRENT 2. */
const CONTEXT = 2048;

describe("the playground bounds lengths by the model's context", { skip }, () => {
  let playground: Playground;
  let predicts = 0;
  before(async () => {
    playground = await openPlayground();
    playground.page.on("request", (request) => {
      if (new URL(request.url()).pathname === "/predict") predicts++;
    });
    await playground.page.goto(`${playground.apps.textgenUrl}/ui/#generate`);
    await playground.page.waitForSelector("body[data-ready=true]");
  });
  after(async () => {
    await playground?.browser.close();
    await playground?.apps.close();
  });

  it("Generate picks the model, and Max new tokens stops at its context, said in the page's words", async () => {
    const { page } = playground;
    await page.waitForSelector(`#generate-model option[value="${testModelName}"]`, { state: "attached" });
    await page.waitForFunction(
      (max) => (document.querySelector("#max-length") as unknown as { max: string }).max === String(max),
      CONTEXT - 1,
    );
    assert.match((await page.textContent("#max-length-hint")) ?? "", new RegExp(`At most ${CONTEXT - 1}`));
    await page.fill("#max-length", "5000");
    const before = predicts;
    await page.click("#generate-button");
    await page.waitForSelector("#generate-status[data-kind=error]", { state: "attached" });
    const status = (await page.textContent("#generate-status")) ?? "";
    assert.match(status, new RegExp(`Max new tokens can be at most ${CONTEXT - 1}`));
    assert.doesNotMatch(status, /max_length/);
    assert.equal(predicts, before, "nothing was sent");
  });

  it("JSON output stands alone, not glued to the prompt", async () => {
    const { page } = playground;
    await page.fill("#max-length", "24");
    await page.fill("#prompt", "Describe a cat");
    await page.fill("#json-schema", '{"type":"object","properties":{"name":{"type":"string"}}}');
    await page.click("#generate-button");
    await page.waitForFunction(() => {
      const state = document.querySelector("#generate-output")?.dataset.state;
      return state === "done" || state === "error";
    });
    assert.equal(await page.textContent("#generate-output .prompt-echo"), "");
    const generated = (await page.textContent("#generate-output .generated")) ?? "";
    assert.match(generated.trimStart(), /^\{/, generated);
    await page.fill("#json-schema", "");
  });

  it("a new error clears the last request's tool calls", async () => {
    const { page } = playground;
    await page.fill(
      "#tools",
      '[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]',
    );
    await page.selectOption("#tool-choice", "required");
    await page.click("#generate-button");
    await page.waitForSelector("#tool-calls:not([hidden])");
    await page.fill("#tools", "[not json");
    await page.click("#generate-button");
    await page.waitForFunction(() =>
      /Tools is not valid JSON/.test(
        (document.querySelector("#generate-status") as unknown as { textContent: string }).textContent,
      ),
    );
    assert.equal(await page.isHidden("#tool-calls"), true, "the old tool call is gone");
    await page.fill("#tools", "");
  });

  it("Chat's length is bounded the same way", async () => {
    const { page } = playground;
    await page.click("#tab-chat");
    await page.waitForFunction(
      (max) => (document.querySelector("#chat-max-tokens") as unknown as { max: string }).max === String(max),
      CONTEXT - 1,
    );
    await page.fill("#chat-max-tokens", "9999");
    await page.fill("#chat-input", "Hello");
    await page.press("#chat-input", "Enter");
    await page.waitForFunction(() =>
      /Length can be at most/.test(
        (document.querySelector("#chat-status") as unknown as { textContent: string }).textContent,
      ),
    );
    assert.equal(await page.locator("#chat-log .msg").count(), 0, "nothing was sent");
  });

  it("on a 390 px phone the composer never covers the end of the newest reply", async () => {
    const phone: Page = await playground.browser.context.newPage();
    const watch = watchPage(phone);
    try {
      await phone.setViewportSize({ width: 390, height: 844 });
      await phone.goto(`${playground.apps.textgenUrl}/ui/#chat`);
      await phone.waitForSelector("body[data-ready=true]");
      await phone.fill("#chat-max-tokens", "160");
      // Replies until the conversation is taller than the screen, so the composer sticks over it.
      for (let turn = 0; turn < 6; turn++) {
        const answered = await phone.locator("#chat-log .msg-assistant").count();
        await phone.fill("#chat-input", `Tell me a story number ${turn + 1}`);
        await phone.press("#chat-input", "Enter");
        await phone.waitForFunction(
          (n) => {
            const state = document.querySelectorAll("#chat-log .msg-assistant")[n]?.dataset.state;
            return state === "done" || state === "error";
          },
          answered,
          { timeout: 120_000 },
        );
        const tall = await phone.evaluate(
          () => document.documentElement.scrollHeight > window.innerHeight * 1.5,
        );
        if (tall) break;
      }
      const layout = await phone.evaluate(() => {
        const replies = document.querySelectorAll("#chat-log .msg-assistant");
        const last = replies[replies.length - 1]!.getBoundingClientRect();
        const composer = document.querySelector("#chat-form")!.getBoundingClientRect();
        return {
          replyBottom: last.bottom,
          composerTop: composer.top,
          tall: document.documentElement.scrollHeight > window.innerHeight,
        };
      });
      assert.ok(layout.tall, "the conversation is taller than the screen");
      assert.ok(
        layout.replyBottom <= layout.composerTop + 1,
        `the reply ends at ${layout.replyBottom}px, under the composer starting at ${layout.composerTop}px`,
      );
    } finally {
      await phone.close();
    }
    assert.deepEqual(watch.errors, []);
  });
});
