// The client as a package a team adopts: its CommonJS entry is the module (and current), `require` and `import`
// give the same API, and `npm pack` ships what `exports` names (the types `tsc -p clients/js` checks in make test).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

import * as esm from "../index.js";
import { CJS_ENTRY, CLIENT, MINIPROGRAM_COPY, toCommonJs } from "../cjs.js";

const HERE = path.dirname(CLIENT);

test("the CommonJS entry and the mini-program's copy are the module, current", () => {
  const expected = toCommonJs(readFileSync(CLIENT, "utf8"));
  assert.equal(readFileSync(CJS_ENTRY, "utf8"), expected, "run node clients/js/cjs.js");
  assert.equal(readFileSync(MINIPROGRAM_COPY, "utf8"), expected, "run node clients/js/cjs.js");
});

test("require and import give the same API", () => {
  const cjs = createRequire(import.meta.url)(CJS_ENTRY);
  assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort());
  assert.equal(typeof cjs.createClient({ baseUrl: "https://x" }).cook, "function");
});

test("npm pack ships the entries exports names", () => {
  const [packed] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json"], { cwd: HERE, encoding: "utf8" }));
  const files = packed.files.map((f) => f.path).sort();
  const manifest = JSON.parse(readFileSync(path.join(HERE, "package.json"), "utf8"));
  for (const entry of Object.values(manifest.exports["."])) assert.ok(files.includes(entry.replace("./", "")), entry);
  assert.ok(files.includes("CHANGELOG.md") && !files.some((f) => f.startsWith("test/")), files.join(","));
});
