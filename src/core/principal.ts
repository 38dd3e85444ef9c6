/** Who a request acts for: what a key authenticates to (auth.ts), also carried by internal calls. */
export interface Principal {
  tenant: string;
  scopes: ReadonlySet<string>;
  admin: boolean;
  /** First 12 hex digits of the key's digest: safe to log, enough to tell keys apart. */
  keyId: string;
}
