/**
 * DNS rebinding (issue #35; Ollama's CVE-2024-28224): a page at http://attacker.example:<port> whose
 * name now resolves to 127.0.0.1 sends same-origin requests, as far as the browser knows, carrying
 * `Host: attacker.example:<port>` and a matching `Origin`. With auth off (the default) both apps must
 * refuse them with 403 and change nothing; the server's own names and addresses, ALLOWED_HOSTS, and
 * the documented nginx proxy (`proxy_set_header Host $host`, so Host is the proxy's name) still work,
 * and the CSRF check takes its own origins from the configuration, not from Host.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { openRagApp, removeTempDirs, type RagApp } from "../helpers/rag-http.js";
import { startTextgen, type RunningTextgen } from "../helpers/servers.js";

interface Raw {
  status: number;
  body: string;
}

/** One request with any Host header (fetch does not let a caller choose it). */
function raw(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const request = http.request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        agent: false,
        headers: { ...(payload === undefined ? {} : { "content-type": "application/json" }), ...headers },
      },
      (response) => {
        let text = "";
        response.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body: text }));
      },
    );
    request.on("error", reject);
    request.end(payload);
  });
}

/** The headers a rebinding page's request carries: its own name as Host and Origin. */
const rebound = (port: number) => ({
  host: `attacker.example:${port}`,
  origin: `http://attacker.example:${port}`,
});

describe("DNS rebinding with auth off: a Host that is not ours is 403 on both apps (#35)", () => {
  let textgen: RunningTextgen;
  let rag: RagApp;
  let ragPort: number;
  let textgenPort: number;

  before(async () => {
    textgen = await startTextgen({ ALLOWED_HOSTS: "lectern.internal" });
    textgenPort = Number(new URL(textgen.url).port);
    ({ app: rag } = await openRagApp({ ALLOWED_HOSTS: "lectern.internal" }));
    await rag.listen({ host: "127.0.0.1", port: 0 });
    ragPort = (rag.server.address() as AddressInfo).port;
    const built = await raw(
      ragPort,
      "POST",
      "/rag/build",
      {},
      { index_name: "kept", documents: ["tides and moons"] },
    );
    assert.equal(built.status, 201, built.body);
  });

  after(async () => {
    await textgen?.close();
    await rag?.close();
    removeTempDirs();
  });

  it("the RAG app refuses a rebound page's build, delete and reads; the index stays", async () => {
    for (const [method, path, body] of [
      ["POST", "/rag/build", { index_name: "evil", documents: ["x"] }],
      ["DELETE", "/rag/indices/kept", undefined],
      ["GET", "/rag/indices", undefined],
      ["POST", "/rag/query", { index_name: "kept", query: "tides" }],
      ["GET", "/health", undefined],
    ] as const) {
      const answer = await raw(ragPort, method, path, rebound(ragPort), body);
      assert.equal(answer.status, 403, `${method} ${path}: ${answer.body}`);
      assert.match(JSON.parse(answer.body).error.message, /ALLOWED_HOSTS/);
    }
    const listed = await raw(ragPort, "GET", "/rag/indices", {});
    assert.deepEqual(
      JSON.parse(listed.body).indices.map((index: { name: string }) => index.name),
      ["kept"],
    );
  });

  it("the text generation app refuses a rebound page's unload, keep_alive 0 and generation; the model stays", async () => {
    for (const [method, path, body] of [
      ["POST", "/models/unload", { model: "stories260K" }],
      ["POST", "/api/generate", { model: "stories260K", keep_alive: 0 }],
      ["POST", "/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }],
      ["GET", "/v1/models", undefined],
    ] as const) {
      const answer = await raw(textgenPort, method, path, rebound(textgenPort), body);
      assert.equal(answer.status, 403, `${method} ${path}: ${answer.body}`);
    }
    const models = JSON.parse((await raw(textgenPort, "GET", "/v1/models", {})).body) as {
      data: Array<{ status: string }>;
    };
    assert.equal(models.data[0]!.status, "loaded");
  });

  it("the server's own names and addresses, ALLOWED_HOSTS and a proxy's Host still work", async () => {
    for (const host of [
      `127.0.0.1:${ragPort}`,
      `localhost:${ragPort}`,
      `[::1]:${ragPort}`,
      "127.0.0.1", // nginx's $host: the proxy's name, without a port
      `lectern.internal`,
      `10.1.2.3:${ragPort}`, // an address cannot be rebound
      `app.localhost:${ragPort}`,
    ]) {
      const answer = await raw(ragPort, "GET", "/rag/indices", { host });
      assert.equal(answer.status, 200, `${host}: ${answer.body}`);
    }
  });

  it("CSRF: own origins come from the configuration, not from the Host a request names", async () => {
    const write = (headers: Record<string, string>) =>
      raw(ragPort, "POST", "/rag/query", headers, { index_name: "kept", query: "tides" });
    // The app's own origin by its loopback names, on the port the request reached.
    assert.equal((await write({ origin: `http://127.0.0.1:${ragPort}` })).status, 200);
    assert.equal(
      (await write({ host: `localhost:${ragPort}`, origin: `http://localhost:${ragPort}` })).status,
      200,
    );
    // An ALLOWED_HOSTS name behind a TLS proxy: its origin has no port of ours.
    assert.equal((await write({ host: "lectern.internal", origin: "https://lectern.internal" })).status, 200);
    // Another port of localhost, another site, and a Host/Origin pair the page chose: refused.
    for (const headers of [
      { host: `127.0.0.1:${ragPort}`, origin: `http://127.0.0.1:${ragPort + 1}` },
      { host: `127.0.0.1:${ragPort}`, origin: "https://evil.example" },
      { host: `127.0.0.1:${ragPort}`, origin: `http://attacker.example:${ragPort}` },
    ]) {
      const answer = await write(headers);
      assert.equal(answer.status, 403, `${JSON.stringify(headers)}: ${answer.body}`);
    }
  });
});
