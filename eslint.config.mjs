import { defineConfig, globalIgnores } from "eslint/config";
import nextVitals from "eslint-config-next/core-web-vitals";
import nextTypescript from "eslint-config-next/typescript";

export default defineConfig([
  ...nextVitals,
  ...nextTypescript,
  {
    // `const { dropped: _dropped, ...kept } = x` is how a property is left out; `_name` marks a deliberate unused.
    rules: {
      "@typescript-eslint/no-unused-vars": [
        "warn",
        { ignoreRestSiblings: true, argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrorsIgnorePattern: "^_" },
      ],
    },
  },
  {
    // The layering (README, "Contributing"): libraries never import the programs that use them; nothing reaches
    // into the toolstack but to start it; the server never imports the console's UI, nor anything bench/ or
    // e2e/. Tests and their helpers may (they start services and drive them from outside).
    files: ["server/**/*.ts", "components/**/*.{ts,tsx}", "app/**/*.{ts,tsx}", "lib/**/*.ts", "pages/**/*.ts", "scripts/**/*.ts"],
    ignores: ["**/*.test.ts", "**/testing.ts", "**/*-testing.ts"],
    rules: {
      "import/no-restricted-paths": [
        "error",
        {
          zones: [
            {
              target: ["./server/xenapi", "./server/xva", "./server/nbd", "./server/storage", "./server/datasources", "./lib"],
              from: ["./server/toolstack", "./server/api", "./server/transfers", "./server/cli", "./server/auth", "./server/plugins", "./server/conformance"],
              message: "a library never imports a program that uses it",
            },
            {
              target: ["./server/!(toolstack)/**", "./components", "./app", "./lib", "./pages", "./scripts"],
              from: "./server/toolstack",
              except: ["./serve.ts", "./features.ts"],
              message: "only `hangar serve` reaches into the toolstack (to start it); its wire code is server/xenapi",
            },
            { target: "./server/transfers", from: "./server/api", message: "the console's API uses the transfers, not the other way round" },
            { target: ["./server", "./lib"], from: ["./components", "./app", "./pages"], message: "server code never imports the console's UI" },
            { target: "./components", from: "./app", message: "components take what a page gives them (props), never import the page" },
            { target: ["./server", "./components", "./app", "./lib", "./pages", "./scripts"], from: ["./bench", "./e2e"] },
          ],
        },
      ],
    },
  },
  {
    // Tool configs (postcss, next, playwright) are read by their tools, never imported by name.
    files: ["*.config.{js,mjs,ts}"],
    rules: { "import/no-anonymous-default-export": "off" },
  },
  globalIgnores([".next/**", "out/**", "build/**", "next-env.d.ts", "node_modules/**", "test-results/**", "playwright-report/**", "**/.bundle/**", ".zt/**"]),
]);
