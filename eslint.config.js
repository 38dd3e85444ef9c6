import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "data/", "models/", "bench/results/", "web/vendor/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // The playground runs in the browser, not in Node.
  { files: ["web/**/*.js"], languageOptions: { globals: globals.browser } },
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
);
