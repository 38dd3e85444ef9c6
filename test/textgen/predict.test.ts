import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildTextgenApp } from "../../src/textgen/app.js";
import type { LlamaGenerator } from "../../src/textgen/engine/llama-generator.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import { testConfig, testModelName, testModelPath } from "../helpers/env.js";

type App = Awaited<ReturnType<typeof buildTextgenApp>>;

function assertErrorShape(body: unknown, status: number) {
  const error = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } }).error;
  assert.ok(error, `status ${status}: body has no "error": ${JSON.stringify(body)}`);
  assert.equal(typeof error.code, "string");
  assert.equal(typeof error.message, "string");
  assert.ok((error.message as string).length > 0);
  assert.ok(Array.isArray(error.details));
}

describe("text generation API with the real test model", () => {
  let app: App;
  const config = testConfig({ MAX_NEW_TOKENS: "256" });

  before(async () => {
    const generator = createGenerator(config) as LlamaGenerator;
    app = await buildTextgenApp({ config, generator });
    await generator.ready();
    assert.equal(generator.status().state, "ready");
  });
  after(async () => app.close());

  const predict = (payload: unknown) =>
    app.inject({ method: "POST", url: "/predict", payload: payload as object });

  it("GET /health is healthy with the model's one name (its file name) and its architecture", async () => {
    const res = await app.inject({ method: "GET", url: "/health" });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), {
      status: "healthy",
      model_name: testModelName,
      model_architecture: "llama",
      model_loaded: true,
    });
  });

  it("GET / names the service and the version from package.json", async () => {
    const res = await app.inject({ method: "GET", url: "/" });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { message: "Lectern Text Generation API v0.2.0", docs: "/docs" });
  });

  it("POST /predict at temperature 0 continues the text, identically on repeat", async () => {
    const payload = { text: "Once upon a time", max_length: 20, temperature: 0 };
    const first = await predict(payload);
    assert.equal(first.statusCode, 200, first.body);
    const body = first.json();
    assert.equal(typeof body.generated_text, "string");
    assert.ok(body.generated_text.length > 0);
    assert.ok(!body.generated_text.startsWith("Once upon a time"), "continuation only");
    assert.equal(body.model_name, testModelName);
    assert.ok(body.tokens_generated >= 1 && body.tokens_generated <= 20);
    assert.ok(body.finish_reason === "length" || body.finish_reason === "stop");
    assert.ok(body.prompt_tokens >= 2);
    assert.equal(typeof body.elapsed_ms, "number");
    const second = (await predict(payload)).json();
    assert.equal(second.generated_text, body.generated_text);
    assert.equal(second.tokens_generated, body.tokens_generated);
  });

  it("max_length 5 yields exactly the tokens generated, at most 5", async () => {
    const res = await predict({ text: "Once upon a time", max_length: 5, temperature: 0 });
    assert.equal(res.statusCode, 200);
    const body = res.json();
    assert.equal(body.tokens_generated, 5);
    assert.equal(body.finish_reason, "length");
    // The count is the model's, not an estimate: streaming the same request yields as many tokens.
    let counted = 0;
    const generator = createGenerator(config) as LlamaGenerator;
    await generator.ready();
    try {
      const direct = await generator.generate(
        { prompt: "Once upon a time", maxTokens: 5, temperature: 0, stop: [] },
        (event) => {
          if (event.type === "text-delta") counted++;
        },
      );
      assert.equal(direct.text, body.generated_text);
      assert.equal(direct.tokensGenerated, 5);
      assert.ok(counted >= 1 && counted <= 5);
    } finally {
      await generator.close();
    }
  });

  it("applies the defaults: max_length 128, temperature 0.8", async () => {
    const res = await predict({ text: "Once upon a time" });
    assert.equal(res.statusCode, 200);
    const body = res.json();
    assert.ok(body.tokens_generated >= 1 && body.tokens_generated <= 128);
    if (body.finish_reason === "length") assert.equal(body.tokens_generated, 128);
  });

  it("stop ends generation with finish_reason stop and leaves the stop string out", async () => {
    const greedy = (await predict({ text: "Once upon a time", max_length: 30, temperature: 0 })).json();
    assert.match(greedy.generated_text, /Lily/);
    const res = await predict({ text: "Once upon a time", max_length: 30, temperature: 0, stop: ["Lily"] });
    assert.equal(res.statusCode, 200);
    const body = res.json();
    assert.equal(body.finish_reason, "stop");
    assert.ok(!body.generated_text.includes("Lily"));
    assert.ok(greedy.generated_text.startsWith(body.generated_text));
    assert.ok(body.tokens_generated < greedy.tokens_generated);
    const single = (
      await predict({ text: "Once upon a time", max_length: 30, temperature: 0, stop: "Lily" })
    ).json();
    assert.equal(single.generated_text, body.generated_text);
  });

  it("a seed makes sampling at temperature > 0 repeatable; sampling options are accepted", async () => {
    const payload = {
      text: "The cat",
      max_length: 16,
      temperature: 1.2,
      top_p: 0.9,
      top_k: 40,
      min_p: 0.05,
      repeat_penalty: 1.1,
      seed: 42,
    };
    const a = await predict(payload);
    const b = await predict(payload);
    assert.equal(a.statusCode, 200, a.body);
    assert.equal(a.json().generated_text, b.json().generated_text);
  });

  it("a prompt that cannot fit the context with max_length is a 400 that says so", async () => {
    const res = await predict({ text: "Once upon a time there was a cat. ".repeat(600), max_length: 10 });
    assert.equal(res.statusCode, 400);
    assertErrorShape(res.json(), 400);
    assert.match(res.json().error.message, /context/);
    assert.match(res.json().error.message, /Shorten the text, lower max_length, or set truncate: true/);
  });

  it("with truncate: true, a prompt too long for the context loses its start instead", async () => {
    const res = await predict({
      text: "Once upon a time there was a cat. ".repeat(600),
      max_length: 10,
      temperature: 0,
      truncate: true,
    });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().tokens_generated, 10);
    assert.ok(
      res.json().prompt_tokens + 10 <= 1024,
      "the kept prompt fits the sequence's share of the context",
    );
  });

  describe("bounds, just inside and just outside", () => {
    const cases: Array<[string, Record<string, unknown>, number]> = [
      ["max_length 1", { max_length: 1 }, 200],
      ["max_length 0", { max_length: 0 }, 400],
      ["max_length = server max (256)", { max_length: 256 }, 200],
      ["max_length = server max + 1", { max_length: 257 }, 400],
      ["max_length -1", { max_length: -1 }, 400],
      ["max_length 1.5", { max_length: 1.5 }, 400],
      ["temperature 0", { temperature: 0, max_length: 2 }, 200],
      ["temperature 2", { temperature: 2, max_length: 2 }, 200],
      ["temperature -0.01", { temperature: -0.01 }, 400],
      ["temperature 2.01", { temperature: 2.01 }, 400],
      ["top_p 1", { top_p: 1, max_length: 2 }, 200],
      ["top_p 1.1", { top_p: 1.1 }, 400],
      ["top_k -1", { top_k: -1 }, 400],
      // One rule in every dialect (issue #34): -1 is a random seed; below it is out of range.
      ["seed -1", { seed: -1, max_length: 2 }, 200],
      ["seed -2", { seed: -2 }, 400],
      ["4 stop strings", { stop: ["a", "b", "c", "d"], max_length: 2 }, 200],
      ["5 stop strings", { stop: ["a", "b", "c", "d", "e"] }, 400],
      ["empty stop string", { stop: [""] }, 400],
      ["text of 1 character", { text: "A", max_length: 2 }, 200],
      ["empty text", { text: "" }, 400],
      ["text of 32,769 characters", { text: "a".repeat(32_769) }, 400],
    ];
    for (const [name, fields, status] of cases) {
      it(`${name} → ${status}`, async () => {
        const res = await predict({ text: "Once upon a time", max_length: 4, temperature: 0, ...fields });
        assert.equal(res.statusCode, status, res.body);
        if (status !== 200) assertErrorShape(res.json(), status);
      });
    }

    it("text of 32,768 characters passes validation and then meets the context check", async () => {
      const res = await predict({ text: "a ".repeat(16_384), max_length: 4 });
      assert.equal(res.statusCode, 400);
      assert.match(res.json().error.message, /context/);
    });
  });

  describe("malformed requests get a 4xx JSON error, never a 5xx", () => {
    const bad: Array<[string, { payload?: string; contentType?: string; method?: "GET" | "POST" }]> = [
      ["missing text", { payload: JSON.stringify({ max_length: 5 }) }],
      ["text is a number", { payload: JSON.stringify({ text: 5 }) }],
      ["text is null", { payload: JSON.stringify({ text: null }) }],
      ["max_length is a string", { payload: JSON.stringify({ text: "hi", max_length: "5" }) }],
      ["temperature is a string", { payload: JSON.stringify({ text: "hi", temperature: "hot" }) }],
      ["stream is a string", { payload: JSON.stringify({ text: "hi", stream: "yes" }) }],
      ["stop is an object", { payload: JSON.stringify({ text: "hi", stop: { a: 1 } }) }],
      ["body is an array", { payload: JSON.stringify([{ text: "hi" }]) }],
      ["body is a string", { payload: JSON.stringify("hi") }],
      ["malformed JSON", { payload: '{"text": "hi"' }],
      ["empty body", { payload: "" }],
      ["text/plain body", { payload: "hello", contentType: "text/plain" }],
      ["1 MB text", { payload: JSON.stringify({ text: "x".repeat(1024 * 1024) }) }],
      ["__proto__ key", { payload: '{"text":"hi","__proto__":{"polluted":true}}' }],
    ];
    for (const [name, { payload, contentType }] of bad) {
      it(name, async () => {
        const res = await app.inject({
          method: "POST",
          url: "/predict",
          payload,
          headers: { "content-type": contentType ?? "application/json" },
        });
        assert.ok(res.statusCode >= 400 && res.statusCode < 500, `${res.statusCode} ${res.body}`);
        assertErrorShape(res.json(), res.statusCode);
        assert.ok(!res.body.includes("at /"), "no stack trace");
      });
    }

    it("1 MB text is 413", async () => {
      const res = await predict({ text: "x".repeat(1024 * 1024) });
      assert.equal(res.statusCode, 413);
      assert.equal(res.json().error.code, "payload_too_large");
    });

    it("unknown route and wrong method are 404 JSON", async () => {
      for (const res of [
        await app.inject({ method: "GET", url: "/nope" }),
        await app.inject({ method: "GET", url: "/predict" }),
      ]) {
        assert.equal(res.statusCode, 404);
        assertErrorShape(res.json(), 404);
      }
    });

    it("returns an X-Request-Id, echoing the client's", async () => {
      const res = await app.inject({ method: "GET", url: "/", headers: { "x-request-id": "abc-123" } });
      assert.equal(res.headers["x-request-id"], "abc-123");
    });
  });

  describe("documentation", () => {
    it("GET /openapi.json describes /predict from the schemas", async () => {
      const res = await app.inject({ method: "GET", url: "/openapi.json" });
      assert.equal(res.statusCode, 200);
      const doc = res.json();
      assert.equal(doc.info.version, "0.2.0");
      const body = doc.paths["/predict"].post.requestBody.content["application/json"].schema;
      assert.deepEqual(
        body.required,
        ["text", "max_length", "temperature"].filter((f) => body.required.includes(f)),
      );
      assert.equal(body.properties.max_length.default, 128);
      assert.equal(body.properties.temperature.default, 0.8);
      assert.equal(body.properties.max_length.maximum, 256);
    });

    it("GET /docs serves Swagger UI from the package, referring to nothing off this server", async () => {
      const page = await app.inject({ method: "GET", url: "/docs/" });
      assert.equal(page.statusCode, 200);
      assert.match(page.body, /swagger-ui/);
      const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
      assert.ok(assets.length >= 2);
      for (const asset of assets) {
        assert.ok(!/^(https?:)?\/\//.test(asset), `external asset ${asset}`);
        const url = new URL(asset, "http://x/docs/").pathname;
        const res = await app.inject({ method: "GET", url });
        assert.equal(res.statusCode, 200, url);
      }
      const init = await app.inject({ method: "GET", url: "/docs/static/swagger-initializer.js" });
      assert.equal(init.statusCode, 200);
      const code = init.body
        .split("\n")
        .filter((line) => !line.trim().startsWith("//"))
        .join("\n");
      assert.ok(!/https?:\/\//.test(code), code);
    });
  });
});

describe("text generation API without a usable model", () => {
  it("reports loading, then unhealthy with the reason; /predict answers 503 with how to set MODEL_PATH", async () => {
    const config = testConfig({ MODEL_PATH: "/nonexistent/model.gguf" });
    const generator = createGenerator(config) as LlamaGenerator;
    const app = await buildTextgenApp({ config, generator });
    try {
      await generator.ready();
      const health = await app.inject({ method: "GET", url: "/health" });
      assert.equal(health.statusCode, 503);
      assert.equal(health.json().status, "unhealthy");
      assert.match(health.json().reason, /MODEL_PATH/);
      const res = await app.inject({ method: "POST", url: "/predict", payload: { text: "hi" } });
      assert.equal(res.statusCode, 503);
      assertErrorShape(res.json(), 503);
      assert.match(res.json().error.message, /MODEL_PATH/);
    } finally {
      await app.close();
    }
  });

  it("a Hugging Face reference that cannot be downloaded offline makes /health unhealthy, not stuck", async () => {
    const modelsDir = mkdtempSync(path.join(os.tmpdir(), "lectern-models-"));
    const config = testConfig({ MODEL_PATH: "hf:nobody/none-GGUF/none.gguf", MODELS_DIR: modelsDir });
    const generator = createGenerator(config) as LlamaGenerator;
    const app = await buildTextgenApp({ config, generator });
    try {
      await generator.ready();
      const health = await app.inject({ method: "GET", url: "/health" });
      assert.equal(health.statusCode, 503);
      assert.match(health.json().reason, /MODELS_DIR|cannot be reached/);
    } finally {
      await app.close();
    }
  });

  it("a Hugging Face reference already in MODELS_DIR loads with no network", async () => {
    const modelsDir = mkdtempSync(path.join(os.tmpdir(), "lectern-models-"));
    // node-llama-cpp stores hf:<owner>/<repo>/<file> as hf_<owner>_<repo>_<file>
    copyFileSync(testModelPath, path.join(modelsDir, "hf_karpathy_tinyllamas_stories260K.gguf"));
    const config = testConfig({
      MODEL_PATH: "hf:karpathy/tinyllamas/stories260K.gguf",
      MODELS_DIR: modelsDir,
    });
    const generator = createGenerator(config) as LlamaGenerator;
    const app = await buildTextgenApp({ config, generator });
    try {
      await generator.ready();
      assert.deepEqual(generator.status(), { state: "ready" });
      const res = await app.inject({
        method: "POST",
        url: "/predict",
        payload: { text: "Once", max_length: 3 },
      });
      assert.equal(res.statusCode, 200);
    } finally {
      await app.close();
    }
  });

  it("never says healthy before the model can generate", async () => {
    const config = testConfig();
    const generator = createGenerator(config) as LlamaGenerator;
    const app = await buildTextgenApp({ config, generator });
    try {
      const early = await app.inject({ method: "GET", url: "/health" });
      if (generator.status().state === "loading" || early.statusCode === 503) {
        assert.equal(early.statusCode, 503);
        assert.equal(early.json().status, "loading");
      }
      const predictEarly = await app.inject({
        method: "POST",
        url: "/predict",
        payload: { text: "hi", max_length: 2 },
      });
      assert.ok(predictEarly.statusCode === 503 || predictEarly.statusCode === 200);
      await generator.ready();
      const late = await app.inject({ method: "GET", url: "/health" });
      assert.equal(late.statusCode, 200);
    } finally {
      await app.close();
    }
  });
});
