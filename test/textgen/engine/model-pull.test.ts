/**
 * The pure parts of engine/model-pull.ts: which references may be pulled, the name a hub file gets
 * (node-llama-cpp's own, checked against its resolveModelFile so MODEL_PATH finds a pulled file), the
 * host list and the private-address check, and a default policy that refuses loopback before any
 * connection. Downloads themselves are tested against HTTPS servers in
 * test/reliability/model-management.test.ts.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { resolveModelFile } from "node-llama-cpp";
import { loadConfig, MODEL_HUB_HOSTS } from "../../../src/core/config.js";
import { DomainError } from "../../../src/core/errors.js";
import {
  isListedHost,
  isPrivateAddress,
  planPull,
  pullModel,
} from "../../../src/textgen/engine/model-pull.js";

const dirs: string[] = [];
after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
const tempDir = () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-pull-"));
  dirs.push(dir);
  return dir;
};

const refused = (reference: string, pattern: RegExp) =>
  assert.throws(
    () => planPull(reference),
    (error: unknown) =>
      error instanceof DomainError && error.kind === "invalid" && pattern.test(error.message),
  );

describe("planPull", () => {
  it("names hub files as node-llama-cpp does, so its resolveModelFile finds them offline", async () => {
    const references = [
      "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf",
      "hf:ggml-org/models/tinyllamas/stories260K.gguf",
      "hf:owner/Some-Model-GGUF/other-name.Q8_0.gguf",
      "hf:owner/repo/folder/sub/model.gguf#dev",
      "hf:owner/repo/model/model.gguf",
      "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/qwen2.5-0.5b-instruct-q4_k_m.gguf",
    ];
    for (const reference of references) {
      const dir = tempDir();
      const plan = planPull(reference);
      writeFileSync(path.join(dir, plan.fileName), "GGUF");
      const found = await resolveModelFile(reference, { directory: dir, download: false, cli: false });
      assert.equal(found, path.join(dir, plan.fileName), reference);
      assert.equal(plan.url.protocol, "https:");
      assert.equal(plan.url.host, "huggingface.co");
    }
  });

  it("keeps an https URL's file name and the URL as it is", () => {
    const plan = planPull("https://models.example/files/tiny-model.gguf?token=x");
    assert.equal(plan.fileName, "tiny-model.gguf");
    assert.equal(plan.url.href, "https://models.example/files/tiny-model.gguf?token=x");
  });

  it("refuses http, other schemes, local paths, repositories without a file and odd names", () => {
    refused("http://127.0.0.1:8080/model.gguf", /https only/);
    refused("ftp://models.example/model.gguf", /https only/);
    refused("/etc/passwd", /not a model reference/);
    refused("models/x.gguf", /not a model reference/);
    refused("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF", /names no file/);
    refused("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", /names no file/);
    refused("https://models.example/notes.txt", /must name a \.gguf file/);
    refused("https://models.example/", /must name a \.gguf file/);
    refused("hf:owner/repo/../../x.gguf", /not a plain name/);
    refused("https://models.example/model-00001-of-00003.gguf", /split model/);
  });
});

describe("hosts and addresses", () => {
  it("the default list is the model hub and the hosts its downloads redirect to", () => {
    const config = loadConfig({});
    assert.deepEqual(config.models.modelsPullHosts, MODEL_HUB_HOSTS);
    for (const host of [
      "huggingface.co",
      "cdn-lfs.huggingface.co",
      "cdn-lfs-us-1.hf.co",
      "cas-bridge.xethub.hf.co",
      "us.aws.cdn.hf.co",
    ])
      assert.ok(isListedHost(host, MODEL_HUB_HOSTS), host);
    for (const host of ["hf.co.attacker.example", "evilhuggingface.co", "127.0.0.1", "localhost"])
      assert.ok(!isListedHost(host, MODEL_HUB_HOSTS), host);
  });

  it("MODELS_PULL_HOSTS takes names, *.suffix and .suffix; a scheme or port is a config error", () => {
    const hosts = loadConfig({ MODELS_PULL_HOSTS: "Mirror.Example, *.cdn.example,.other.example" }).models
      .modelsPullHosts;
    assert.deepEqual(hosts, ["mirror.example", ".cdn.example", ".other.example"]);
    assert.throws(() => loadConfig({ MODELS_PULL_HOSTS: "https://mirror.example" }), /MODELS_PULL_HOSTS/);
    assert.throws(() => loadConfig({ MODELS_PULL_HOSTS: "mirror.example:443" }), /MODELS_PULL_HOSTS/);
  });

  it("loopback, private, link-local and mapped addresses are private; public ones are not", () => {
    for (const address of [
      "127.0.0.1",
      "127.9.9.9",
      "10.1.2.3",
      "172.20.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "0.0.0.0",
      "::1",
      "::",
      "fe80::1",
      "fd00::1",
      "::ffff:127.0.0.1",
      "100.64.0.1",
    ])
      assert.ok(isPrivateAddress(address), address);
    for (const address of ["8.8.8.8", "18.244.10.1", "2606:4700::1111"])
      assert.ok(!isPrivateAddress(address), address);
  });

  it("under the default list a pull from loopback is refused before any connection, leaving nothing", async () => {
    const dir = tempDir();
    const policy = { hosts: MODEL_HUB_HOSTS, maxBytes: 1 << 20, timeoutMs: 1000 };
    for (const reference of [
      "https://127.0.0.1:9/x.gguf",
      "https://localhost:9/x.gguf",
      "https://[::1]:9/x.gguf",
    ]) {
      await assert.rejects(
        pullModel(planPull(reference), dir, policy, { signal: new AbortController().signal }),
        (error: unknown) =>
          error instanceof DomainError &&
          error.kind === "invalid" &&
          /not a host models may be pulled from/.test(error.message),
        reference,
      );
    }
    assert.deepEqual(readdirSync(dir), []);
  });
});
