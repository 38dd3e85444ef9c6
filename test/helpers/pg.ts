/**
 * PostgreSQL for tests: every test run gets fresh databases, created through the server named by
 * LECTERN_TEST_DATABASE_URL (else postgres://postgres@127.0.0.1:5432/test) and dropped afterwards.
 */
import { randomBytes } from "node:crypto";

import pg from "pg";

export const TEST_DATABASE_URL =
  process.env.LECTERN_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** Why PostgreSQL cannot be used (to skip with), or null when it answers. */
export async function postgresUnavailable(): Promise<string | null> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 3000 });
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("SELECT 1");
    return null;
  } catch (error) {
    return (
      `PostgreSQL is not reachable at ${redact(TEST_DATABASE_URL)} (${(error as Error).message}); ` +
      "start it or set LECTERN_TEST_DATABASE_URL"
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** Creates `lectern_test_<random>` on the test server; `drop()` removes it, closing its connections. */
export async function createTestDatabase(prefix = "lectern_test"): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(6).toString("hex")}`;
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  client.on("error", () => undefined);
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return url;
  }
}
