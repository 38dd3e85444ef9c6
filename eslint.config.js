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
  // One error model: the code throws domain errors (src/core/errors.ts DomainError); only the HTTP edge
  // makes ApiErrors (the error mapper in core/http.ts, the auth and CORS hooks, the routes and dialect
  // adapters). Tests may build them to check the mapping.
  {
    files: ["src/**/*.ts"],
    ignores: [
      "src/core/http.ts",
      "src/core/auth.ts",
      "src/core/cors.ts",
      "src/**/routes.ts",
      "src/**/*-routes.ts",
      "src/textgen/http/openai.ts",
    ],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector: "NewExpression[callee.name='ApiError']",
          message:
            "Throw a domain error (src/core/errors.ts: badRequest, notFound, conflict, DomainError…); ApiErrors are made at the HTTP edge (core/http.ts toApiError).",
        },
      ],
    },
  },
);
