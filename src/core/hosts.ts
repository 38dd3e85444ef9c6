/**
 * Which `Host` a request may name, and which browser origins are this app's own (issue #35).
 *
 * DNS rebinding (Ollama's CVE-2024-28224): a web page at http://attacker.example:8000 makes its name
 * resolve to 127.0.0.1, and the browser then sends the page's requests, same-origin as far as it
 * knows, to a server on the user's loopback, with `Host: attacker.example:8000` and a matching
 * `Origin`. With auth off (the default) nothing else stops them. So a request whose Host names
 * anything but the bind address, `localhost`, a loopback or other IP address, or ALLOWED_HOSTS is
 * refused with 403, whatever its route. IP literals are allowed because they cannot be rebound: a
 * page whose origin is an IP address is served by that address (the same choice as Vite's and
 * webpack-dev-server's host checks), which keeps `HOST=0.0.0.0` reachable by address.
 *
 * The check runs in Fastify's `rewriteUrl`, which every request passes anyway: a refused request is
 * routed to one hidden route that answers 403, so /health still runs no hook (see request-lifecycle.ts).
 */
import { isIP } from "node:net";
import type { FastifyInstance } from "fastify";
import { forbidden } from "./errors.js";

/** Where requests with a Host that is not allowed are routed (never listed in /docs). */
export const HOST_REFUSED_PATH = "/__lectern/host-not-allowed";

/** The host name of a Host header or URL host (`[::1]:80` → `::1`, lower case, no trailing dot). */
export function hostName(host: string): string {
  const trimmed = host.trim().toLowerCase();
  const bracketed = /^\[([^\]]*)\](?::\d*)?$/.exec(trimmed);
  const name = bracketed ? bracketed[1]! : isIP(trimmed) === 6 ? trimmed : trimmed.replace(/:\d*$/, "");
  return name.endsWith(".") ? name.slice(0, -1) : name;
}

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "::1"]);
/** Addresses that mean "every interface": never in a Host header. */
const WILDCARDS = new Set(["0.0.0.0", "::", ""]);

export interface HostPolicyOptions {
  /** HOST, the bind address. */
  bindAddress: string;
  /** ALLOWED_HOSTS: names, `.suffix` for subdomains, `*` for any. */
  allowedHosts: readonly string[];
}

export class HostPolicy {
  readonly #any: boolean;
  readonly #names = new Set<string>();
  readonly #suffixes: string[] = [];
  /** The names whose origins are ours on any port (a proxy in front may use 443). */
  readonly #configured = new Set<string>();

  constructor(options: HostPolicyOptions) {
    this.#any = options.allowedHosts.includes("*");
    for (const name of LOOPBACK_NAMES) this.#names.add(name);
    const bind = hostName(options.bindAddress);
    if (!WILDCARDS.has(bind)) this.#names.add(bind);
    for (const entry of options.allowedHosts) {
      if (entry === "*") continue;
      if (entry.startsWith(".")) this.#suffixes.push(entry);
      else {
        this.#names.add(entry);
        this.#configured.add(entry);
      }
    }
  }

  /** Whether a host name (no port) is one this server answers to. */
  allowsName(name: string): boolean {
    return (
      this.#names.has(name) ||
      isIP(name) !== 0 ||
      // Browsers resolve *.localhost to loopback themselves, never through DNS (RFC 6761).
      name.endsWith(".localhost") ||
      this.#inSuffixes(name)
    );
  }

  #inSuffixes(name: string): boolean {
    return this.#suffixes.some((suffix) => name.endsWith(suffix) || name === suffix.slice(1));
  }

  /** Whether a request with this Host header may be served. HTTP/1.0 requests may have none. */
  allows(host: string | undefined): boolean {
    return this.#any || host === undefined || this.allowsName(hostName(host));
  }

  /**
   * Whether a browser Origin is this app's own, from the configuration rather than from the Host the
   * request names: a loopback name or the bind address on `port` (the port the request reached),
   * an ALLOWED_HOSTS name or subdomain on any port (behind a proxy), or an IP address equal to the
   * Host's (an address cannot be rebound; a LAN client of `HOST=0.0.0.0`).
   */
  isOwnOrigin(origin: string, host: string | undefined, port: number): boolean {
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false;
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return false;
    const name = hostName(url.host);
    const originPort = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    if (this.#configured.has(name) || this.#inSuffixes(name)) return true;
    if (originPort !== port) return false;
    if (this.#names.has(name)) return true;
    return isIP(name) !== 0 && host !== undefined && hostName(host) === name;
  }

  /** Whether `origin` names an allowed host on `port` (the sibling app's playground). */
  isOriginOnPort(origin: string, port: number): boolean {
    try {
      const url = new URL(origin);
      return Number(url.port) === port && this.allowsName(hostName(url.host));
    } catch {
      return false;
    }
  }

  /** `rewriteUrl` for Fastify: a request whose Host is not allowed goes to the refusing route. */
  rewrite(request: { url?: string; headers: { host?: string } }): string {
    const url = request.url ?? "/";
    return this.allows(request.headers.host) ? url : HOST_REFUSED_PATH;
  }

  /** The route that answers refused Hosts, for every method. */
  registerRefusal(app: FastifyInstance): void {
    app.route({
      method: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
      url: HOST_REFUSED_PATH,
      exposeHeadRoute: false,
      schema: { hide: true },
      handler: async (request) => {
        throw forbidden(
          `Host ${JSON.stringify(request.headers.host ?? "")} is not served here: use the server's address, localhost, or a name listed in ALLOWED_HOSTS (this check stops DNS-rebinding pages)`,
        );
      },
    });
  }
}
