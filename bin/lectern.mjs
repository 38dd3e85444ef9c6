#!/usr/bin/env node
// `npx lectern …` from the repo: runs the TypeScript CLI through tsx, no build step.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/lectern.ts");
