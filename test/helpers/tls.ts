/**
 * HTTPS servers on loopback for tests of outgoing downloads: a self-signed certificate for
 * 127.0.0.1 and localhost, made with `openssl` at test time (nothing checked in, nothing downloaded).
 * A child process trusts it through NODE_EXTRA_CA_CERTS=<certFile>, which Node reads at start-up.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import https from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import path from "node:path";

export interface TestCertificate {
  key: Buffer;
  cert: Buffer;
  /** The certificate's file, for NODE_EXTRA_CA_CERTS. */
  certFile: string;
}

/** A one-day self-signed EC certificate for 127.0.0.1 and localhost, written into `dir`. */
export function makeTestCertificate(dir: string): TestCertificate {
  const keyFile = path.join(dir, "test-key.pem");
  const certFile = path.join(dir, "test-cert.pem");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      keyFile,
      "-out",
      certFile,
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
    ],
    { stdio: "ignore" },
  );
  return { key: readFileSync(keyFile), cert: readFileSync(certFile), certFile };
}

export interface TestHttpsServer {
  port: number;
  /** Connections opened so far, and those still open (a client that left closes its download). */
  connections(): { opened: number; open: number };
  close(): Promise<void>;
}

/** An HTTPS server on 127.0.0.1 (a free port) answering with `handler`. */
export async function startHttpsServer(
  tls: TestCertificate,
  handler: (request: IncomingMessage, response: ServerResponse) => void,
): Promise<TestHttpsServer> {
  const server = https.createServer({ key: tls.key, cert: tls.cert }, handler);
  const sockets = new Set<Socket>();
  let opened = 0;
  server.on("secureConnection", (socket: Socket) => {
    opened++;
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => ({ opened, open: sockets.size }),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
