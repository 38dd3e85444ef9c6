/**
 * Downloads a model for `/api/pull` (issue #35), hardened: the server fetches what a client names, so
 * the request must not reach what the client could not. Only `https` URLs and `hf:` references;
 * every hop (redirects followed by hand, at most MAX_REDIRECTS) must be on MODELS_PULL_HOSTS (by
 * default the model hub: huggingface.co and the CDN and Xet hosts under huggingface.co and hf.co its
 * downloads redirect to), and must resolve to public addresses, checked on the address actually
 * connected to, so a DNS answer cannot swap in a loopback or private one between check and connect.
 * A host listed by exactly its IP address or as `localhost` is taken to be meant: its private
 * address is allowed (a local mirror, the tests).
 *
 * The body goes to a temporary file in MODELS_DIR, counted against MODELS_PULL_MAX_BYTES as it
 * arrives, with MODELS_PULL_TIMEOUT_MS as the longest wait for the next byte, and stopped when the
 * client leaves; no retry (a host that resets connections is an answer, given at once). The file is
 * then checked as GGUF (gguf-check.ts, llama.cpp's own checks and reasons) and only then renamed to
 * its name; on any failure it is removed, so nothing is left on disk.
 *
 * Written here rather than through node-llama-cpp's downloader (ipull), which follows redirects
 * anywhere, retries an unreachable host for ever and keeps partial files.
 */
import { randomUUID } from "node:crypto";
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { createWriteStream } from "node:fs";
import { mkdir, rename, stat, unlink } from "node:fs/promises";
import https from "node:https";
import type { IncomingMessage } from "node:http";
import { BlockList, isIP, type LookupFunction } from "node:net";
import path from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { badRequest, DomainError, isStorageFull, notFound, storageFull } from "../../core/errors.js";
import { VERSION } from "../../core/version.js";
import { inspectGguf, ModelFileError } from "./gguf-check.js";

export interface PullPolicy {
  /** MODELS_PULL_HOSTS: names, `.suffix` for a domain's subdomains. */
  hosts: readonly string[];
  /** MODELS_PULL_MAX_BYTES. */
  maxBytes: number;
  /** MODELS_PULL_TIMEOUT_MS: the longest wait for the server's next byte (connect included). */
  timeoutMs: number;
}

export interface PullPlan {
  /** Where the file is downloaded from (the first hop). */
  url: URL;
  /** Its name in MODELS_DIR: node-llama-cpp's name for a hub file, so MODEL_PATH finds it there too. */
  fileName: string;
}

export interface PullOptions {
  onProgress?: (progress: { completed: number; total: number }) => void;
  signal: AbortSignal;
}

const MAX_REDIRECTS = 5;
const HUB = "https://huggingface.co";
/** A path part used as a file name as it stands: nothing to escape, no folder, no dot-only name. */
const SAFE_PART = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,200}$/;
/** `model-00001-of-00003.gguf`: one part of a split model, which a single download cannot serve. */
const SPLIT_PART = /-\d{5}-of-\d{5}\.gguf$/i;

/** Addresses a pull must not reach unless listed on purpose: loopback, private, link-local, … */
const PRIVATE = new BlockList();
for (const [network, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 3],
] as const)
  PRIVATE.addSubnet(network, bits, "ipv4");
for (const [network, bits] of [
  ["::", 127],
  ["64:ff9b::", 96],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const)
  PRIVATE.addSubnet(network, bits, "ipv6");

/** Whether an address is one a pull may not reach without being listed by it (or as localhost). */
export function isPrivateAddress(address: string): boolean {
  // An IPv4-mapped IPv6 address (::ffff:127.0.0.1) reaches its IPv4 address.
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) return isPrivateAddress(mapped[1]!);
  const family = isIP(address);
  if (family === 0) return true;
  return PRIVATE.check(address, family === 6 ? "ipv6" : "ipv4");
}

/** Whether `host` (a URL's hostname, brackets removed) is on the list: a name, or under a `.suffix`. */
export function isListedHost(host: string, hosts: readonly string[]): boolean {
  const name = host.toLowerCase();
  return hosts.some((entry) =>
    entry.startsWith(".") ? name.endsWith(entry) || name === entry.slice(1) : name === entry,
  );
}

const bareHost = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();

/** What to download for a reference, and under which name; a 400 saying why for anything else. */
export function planPull(reference: string): PullPlan {
  const hub = /^(?:hf|huggingface):(?:\/\/)?(.*)$/i.exec(reference);
  if (hub) return hubPlan(hub[1]!, reference);
  let url: URL;
  try {
    url = new URL(reference);
  } catch {
    throw badRequest(
      `"${reference}" is not a model reference this server can pull: give hf:<owner>/<repo>/<file>.gguf or an https URL`,
      [{ path: "/model" }],
    );
  }
  if (url.protocol !== "https:")
    throw badRequest(`Models are pulled over https only, not ${url.protocol.slice(0, -1)}`, [
      { path: "/model" },
    ]);
  // A hub file's URL is stored under the name its hf: reference would have.
  const parts = url.pathname.split("/").map((part) => safeDecode(part));
  const host = bareHost(url);
  if ((host === "huggingface.co" || host === "hf.co") && parts.length >= 6) {
    const [, owner, repo, kind, branch, ...rest] = parts;
    if (kind === "resolve" || kind === "blob")
      return hubPlan(`${owner}/${repo}/${rest.join("/")}${branch === "main" ? "" : `#${branch}`}`, reference);
  }
  const fileName = parts.at(-1) ?? "";
  checkFileName(fileName, reference);
  return { url, fileName };
}

function safeDecode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

function checkFileName(fileName: string, reference: string): void {
  if (!SAFE_PART.test(fileName) || !fileName.toLowerCase().endsWith(".gguf"))
    throw badRequest(
      `"${reference}" must name a .gguf file (letters, digits, ".", "_" and "-" only), got "${fileName}"`,
      [{ path: "/model" }],
    );
  if (SPLIT_PART.test(fileName))
    throw badRequest(`"${fileName}" is one part of a split model; pull a model that is one file`, [
      { path: "/model" },
    ]);
}

/** `owner/repo/dir/file.gguf[#branch]` on the hub. */
function hubPlan(rest: string, reference: string): PullPlan {
  const [pathPart, branch = "main"] = rest.split("#", 2) as [string, string?];
  const parts = pathPart.split("/");
  if (parts.length < 3)
    throw badRequest(
      `"${reference}" names no file: give hf:<owner>/<repo>/<file>.gguf (the file, not only the repository or a quantization tag)`,
      [{ path: "/model" }],
    );
  const [owner, repo, ...filePath] = parts as [string, string, ...string[]];
  for (const part of [owner, repo, branch || "main", ...filePath.slice(0, -1)])
    if (!SAFE_PART.test(part))
      throw badRequest(`"${reference}" has a part that is not a plain name: "${part}"`, [{ path: "/model" }]);
  const fileName = filePath.at(-1)!;
  checkFileName(fileName, reference);
  const branchName = branch || "main";
  const url = new URL(
    `${HUB}/${owner}/${repo}/resolve/${encodeURIComponent(branchName)}/${filePath.join("/")}?download=true`,
  );
  return { url, fileName: hubFileName(owner, repo, branchName, filePath.slice(0, -1), fileName) };
}

/**
 * The name node-llama-cpp gives a hub file in its models folder (resolveModelFile), so a pulled model
 * is found there by MODEL_PATH or a preset naming the same reference: `hf_<owner>_[<repo>_][<branch>_]
 * [<folders>_]<file>`, the repository left out when the file's name starts with it (a `-GGUF` repo).
 */
function hubFileName(owner: string, repo: string, branch: string, folders: string[], file: string): string {
  const parts = ["hf", owner];
  const stem = file.slice(0, -".gguf".length).toLowerCase();
  const repoMatches =
    repo.toLowerCase().endsWith("-gguf") && stem.startsWith(repo.slice(0, -5).toLowerCase());
  if (!repoMatches || branch !== "main") parts.push(repo);
  if (branch !== "main") parts.push(branch);
  const dirs = folders.at(-1)?.toLowerCase() === stem ? folders.slice(0, -1) : folders;
  if (dirs.length > 0) parts.push(dirs.join("__"));
  return `${parts.join("_")}_${file}`;
}

/**
 * A DNS lookup that refuses private and loopback addresses for `host` unless it is listed as
 * `localhost`: Node connects to the address this returns, so what is checked is what is reached.
 */
function checkedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, found) => {
      if (error) return callback(error, "", 0);
      const addresses = found as LookupAddress[];
      const blocked = allowPrivate ? undefined : addresses.find((entry) => isPrivateAddress(entry.address));
      if (blocked) {
        const refused = Object.assign(
          new Error(`${hostname} resolves to ${blocked.address}, a private or loopback address`),
          { code: "EPULLPRIVATE" },
        );
        return callback(refused, "", 0);
      }
      if (options.all) return callback(null, addresses as never, 0);
      return callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/** One GET, answered with its response (not followed); refused hosts and addresses fail before it. */
function get(url: URL, policy: PullPolicy, signal: AbortSignal): Promise<IncomingMessage> {
  if (url.protocol !== "https:")
    throw badRequest(`The download was redirected to ${url.protocol.slice(0, -1)}, not https: refused`);
  const host = bareHost(url);
  if (!isListedHost(host, policy.hosts))
    throw badRequest(
      `${host} is not a host models may be pulled from (MODELS_PULL_HOSTS: ${policy.hosts.join(", ")})`,
    );
  const listedExactly = policy.hosts.includes(host);
  if (isIP(host) !== 0 && isPrivateAddress(host) && !listedExactly)
    throw badRequest(
      `${host} is a private or loopback address; list it in MODELS_PULL_HOSTS to pull from it`,
    );
  return new Promise((resolve, reject) => {
    const request = https.get(url, {
      lookup: checkedLookup(listedExactly && host === "localhost"),
      signal,
      timeout: policy.timeoutMs,
      headers: { "user-agent": `lectern/${VERSION}`, accept: "*/*" },
    });
    request.once("response", resolve);
    request.once("error", reject);
    request.once("timeout", () =>
      request.destroy(
        Object.assign(new Error(`no answer for ${policy.timeoutMs} ms`), { code: "ETIMEDOUT" }),
      ),
    );
  });
}

/** Follows redirects by hand (each hop checked by `get`) to the response with the file. */
async function open(first: URL, policy: PullPolicy, signal: AbortSignal): Promise<IncomingMessage> {
  let url = first;
  for (let hop = 0; ; hop++) {
    const response = await get(url, policy, signal);
    const status = response.statusCode ?? 0;
    const location = response.headers.location;
    if (status >= 300 && status < 400 && location !== undefined) {
      response.resume();
      if (hop >= MAX_REDIRECTS) throw badRequest(`More than ${MAX_REDIRECTS} redirects from ${first.host}`);
      url = new URL(location, url);
      continue;
    }
    if (status === 200) return response;
    response.resume();
    if (status === 404) throw notFound(`No model file at ${url.origin}${url.pathname} (404)`);
    throw new DomainError("upstream", `${url.host} answered ${status} for ${url.pathname}`);
  }
}

/** Bytes counted as they pass; past `max` the download stops. */
function counter(max: number, total: number, onProgress: PullOptions["onProgress"]): Transform {
  let completed = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      completed += chunk.length;
      if (completed > max) {
        done(badRequest(`The model file is larger than MODELS_PULL_MAX_BYTES (${max} bytes)`));
        return;
      }
      onProgress?.({ completed, total });
      done(null, chunk);
    },
  });
}

/** A failure while downloading, as the client sees it: ours as they are, the network's as a 502. */
function pullError(error: unknown, url: URL, signal: AbortSignal): Error {
  if (error instanceof DomainError) return error;
  if (signal.aborted) return new DomainError("cancelled", "The client left: the pull was stopped");
  if (isStorageFull(error)) return storageFull("MODELS_DIR is full");
  const code = (error as { code?: string }).code;
  const reason = (error as Error).message;
  if (code === "EPULLPRIVATE") return badRequest(`Refused to pull from ${url.host}: ${reason}`);
  return new DomainError(
    "upstream",
    `Downloading from ${url.host} failed: ${reason}${code ? ` (${code})` : ""}`,
  );
}

/**
 * Downloads `plan` into `modelsDir` and returns the file's path (at once when it is there already).
 * Throws a DomainError: 400 for what the policy or the GGUF check refuses, 404 for a file the host
 * does not have, 502 when the host fails, 507 when the disk fills; nothing is left behind.
 */
export async function pullModel(
  plan: PullPlan,
  modelsDir: string,
  policy: PullPolicy,
  options: PullOptions,
): Promise<string> {
  const target = path.join(modelsDir, plan.fileName);
  if ((await stat(target).catch(() => undefined))?.isFile()) return target;
  await mkdir(modelsDir, { recursive: true });
  const partial = path.join(modelsDir, `.pull-${randomUUID()}.partial`);
  try {
    const response = await open(plan.url, policy, options.signal);
    const declared = Number(response.headers["content-length"] ?? NaN);
    if (declared > policy.maxBytes) {
      response.destroy();
      throw badRequest(
        `The model file has ${declared} bytes, more than MODELS_PULL_MAX_BYTES (${policy.maxBytes})`,
      );
    }
    response.setTimeout(policy.timeoutMs, () =>
      response.destroy(Object.assign(new Error(`no data for ${policy.timeoutMs} ms`), { code: "ETIMEDOUT" })),
    );
    const total = Number.isFinite(declared) ? declared : 0;
    await pipeline(
      response,
      counter(policy.maxBytes, total, options.onProgress),
      createWriteStream(partial, { flags: "wx" }),
      { signal: options.signal },
    );
    try {
      await inspectGguf(partial);
    } catch (error) {
      if (error instanceof ModelFileError)
        throw badRequest(`The downloaded file is not a model llama.cpp can load: ${error.message}`);
      throw error;
    }
    await rename(partial, target);
    return target;
  } catch (error) {
    await unlink(partial).catch(() => undefined);
    throw pullError(error, plan.url, options.signal);
  }
}
