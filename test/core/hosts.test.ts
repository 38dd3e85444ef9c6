/**
 * The pieces of issue #35's request checks that need no server: which Host names are served
 * (hosts.ts), which Origins are an app's own, the JSON depth scan (json-body.ts) and the settings
 * that configure them. The apps themselves are attacked in test/reliability/dns-rebinding.test.ts
 * and request-bounds.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadConfig } from "../../src/core/config.js";
import { HostPolicy, hostName } from "../../src/core/hosts.js";
import { depthExceededAt, parseJsonText } from "../../src/core/json-body.js";
import { DomainError } from "../../src/core/errors.js";

describe("HostPolicy", () => {
  const policy = new HostPolicy({
    bindAddress: "127.0.0.1",
    allowedHosts: ["lectern.internal", ".corp.example"],
  });

  it("reads host names from Host headers", () => {
    assert.equal(hostName("LocalHost:8000"), "localhost");
    assert.equal(hostName("[::1]:8001"), "::1");
    assert.equal(hostName("::1"), "::1");
    assert.equal(hostName("example.com."), "example.com");
  });

  it("serves loopback names, IP addresses, *.localhost and ALLOWED_HOSTS; refuses other names", () => {
    for (const host of [
      "127.0.0.1:8000",
      "localhost",
      "[::1]:8000",
      "10.0.0.7:8000",
      "a.localhost:1",
      "lectern.internal",
      "rag.corp.example",
      "corp.example",
      undefined,
    ])
      assert.ok(policy.allows(host), String(host));
    for (const host of [
      "attacker.example:8000",
      "lectern.internal.attacker.example",
      "corp.example.evil",
      "localhost.attacker.example",
    ])
      assert.ok(!policy.allows(host), host);
    assert.ok(new HostPolicy({ bindAddress: "127.0.0.1", allowedHosts: ["*"] }).allows("anything.example"));
    assert.ok(new HostPolicy({ bindAddress: "lectern.lan", allowedHosts: [] }).allows("lectern.lan:8000"));
  });

  it("an app's own origins come from the configuration and the port reached, not from Host", () => {
    assert.ok(policy.isOwnOrigin("http://127.0.0.1:8000", "127.0.0.1:8000", 8000));
    assert.ok(policy.isOwnOrigin("http://localhost:8000", "127.0.0.1:8000", 8000));
    assert.ok(policy.isOwnOrigin("https://lectern.internal", "lectern.internal", 8000));
    assert.ok(policy.isOwnOrigin("http://192.168.1.5:8000", "192.168.1.5:8000", 8000));
    // The page's own name as Host and Origin (DNS rebinding): not own, whatever Host says.
    assert.ok(!policy.isOwnOrigin("http://attacker.example:8000", "attacker.example:8000", 8000));
    assert.ok(!policy.isOwnOrigin("http://localhost:3000", "127.0.0.1:8000", 8000));
    assert.ok(!policy.isOwnOrigin("http://192.168.1.5:8000", "127.0.0.1:8000", 8000));
    assert.ok(!policy.isOwnOrigin("null", "127.0.0.1:8000", 8000));
    assert.ok(!policy.isOwnOrigin("file:///x", "127.0.0.1:8000", 8000));
  });
});

describe("JSON depth scan", () => {
  it("counts arrays and objects, not brackets inside strings or after escapes", () => {
    assert.equal(depthExceededAt('{"a":[1,{"b":[]}]}', 4), -1);
    assert.equal(depthExceededAt('{"a":[1,{"b":[]}]}', 3), 13);
    assert.equal(depthExceededAt('{"a":"[[[[[[{{{{{","b":"\\"[[[[["}', 1), -1);
    assert.equal(depthExceededAt("[".repeat(300) + "]".repeat(300), 256), 256);
  });

  it("parseJsonText refuses deep or invalid text with a 400 naming the limit", () => {
    assert.deepEqual(parseJsonText('{"x":[[1]]}', 8), { x: [[1]] });
    for (const [text, pattern] of [
      ["[".repeat(10) + "]".repeat(10), /deeper than 8 levels .*MAX_JSON_DEPTH/],
      ["{oops", /Malformed JSON body/],
    ] as const)
      assert.throws(
        () => parseJsonText(text, 8),
        (error: unknown) =>
          error instanceof DomainError && error.kind === "invalid" && pattern.test(error.message),
      );
  });
});

describe("settings of issue #35", () => {
  it("ALLOWED_HOSTS takes names and suffixes; * needs keys", () => {
    assert.deepEqual(
      loadConfig({ ALLOWED_HOSTS: "Rag.Example.com, *.corp.example,[::1]" }).auth.allowedHosts,
      ["rag.example.com", ".corp.example", "::1"],
    );
    assert.throws(() => loadConfig({ ALLOWED_HOSTS: "*" }), /ALLOWED_HOSTS=\* needs API_KEYS_FILE/);
    assert.deepEqual(loadConfig({ ALLOWED_HOSTS: "*", API_KEYS_FILE: "/keys" }).auth.allowedHosts, ["*"]);
    assert.throws(() => loadConfig({ ALLOWED_HOSTS: "http://rag.example.com" }), /ALLOWED_HOSTS/);
  });

  it("TRUST_PROXY takes addresses, CIDR ranges, proxy-addr's names or a hop count", () => {
    assert.equal(loadConfig({}).auth.trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: "127.0.0.1,10.0.0.0/8" }).auth.trustProxy, "127.0.0.1,10.0.0.0/8");
    assert.equal(loadConfig({ TRUST_PROXY: "loopback" }).auth.trustProxy, "loopback");
    assert.equal(loadConfig({ TRUST_PROXY: "2" }).auth.trustProxy, 2);
    for (const bad of ["true", "10.0.0.0/40", "nginx"])
      assert.throws(() => loadConfig({ TRUST_PROXY: bad }), /TRUST_PROXY/, bad);
  });

  it("limits have defaults and bounds", () => {
    const config = loadConfig({});
    assert.equal(config.limits.maxJsonDepth, 256);
    assert.equal(config.limits.maxTokenizeChars, 131_072);
    assert.equal(config.models.modelsPullMaxBytes, 64 * 1024 ** 3);
    assert.equal(config.models.modelsPullTimeoutMs, 30_000);
    assert.equal(loadConfig({ MODELS_PULL_MAX_BYTES: "2G" }).models.modelsPullMaxBytes, 2 * 1024 ** 3);
    assert.throws(() => loadConfig({ MAX_JSON_DEPTH: "5000" }), /MAX_JSON_DEPTH/);
  });
});
