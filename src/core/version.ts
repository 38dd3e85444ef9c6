/** Name and version of the product, read once from package.json (the one source of the version). */
import { readFileSync } from "node:fs";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

export const PRODUCT_NAME = "Lectern";
export const VERSION: string = pkg.version;
