import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

export default tseslint.config(
  // bench/data: the Debian documentation unpacked by bench/prepare-debian-corpus.sh (not ours to lint).
  { ignores: ["dist/", "node_modules/", "data/", "models/", "bench/data/", "bench/results/", "web/vendor/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // The playground runs in the browser, not in Node.
  { files: ["web/**/*.js"], languageOptions: { globals: globals.browser } },
  // Install-time scripts are plain JavaScript run by Node.
  { files: ["scripts/**/*.mjs"], languageOptions: { globals: globals.node } },
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
);
