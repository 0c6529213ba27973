// The client as a package a team adopts: its CommonJS entry is the module (and current), `require` and `import`
// give the same API, and `npm pack` ships what `exports` names (the types `tsc -p clients/js` checks in make test).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

import * as esm from "../index.js";
import { CJS_ENTRY, CLIENT, MINIPROGRAM_COPY, NODE_ESM_WRAPPER, esmWrapper, toCommonJs } from "../cjs.js";

const HERE = path.dirname(CLIENT);

test("the CommonJS entry, Node's wrapper and the mini-program's copy are the module, current", () => {
  const source = readFileSync(CLIENT, "utf8");
  assert.equal(readFileSync(CJS_ENTRY, "utf8"), toCommonJs(source), "run node clients/js/cjs.js");
  assert.equal(readFileSync(MINIPROGRAM_COPY, "utf8"), toCommonJs(source), "run node clients/js/cjs.js");
  assert.equal(readFileSync(NODE_ESM_WRAPPER, "utf8"), esmWrapper(source), "run node clients/js/cjs.js");
});

test("an app that imports and requires the package meets one class of each error", async () => {
  // Resolved by the package's own name, as an app resolves it (Node's self-reference through "exports").
  const required = createRequire(import.meta.url)("@chuixiang/client");
  const imported = await import("@chuixiang/client");
  assert.equal(imported.ApiUnreachableError, required.ApiUnreachableError);
  assert.equal(imported.AbortedError, required.AbortedError);
  const error = new required.ApiUnreachableError("offline");
  assert.ok(error instanceof imported.ApiUnreachableError);
});

test("WeChat's npm build finds a CommonJS entry where the miniprogram field points", () => {
  // WeChat's docs (npm support): the build copies the folder the "miniprogram" field names, and its index.js is
  // the entry a page's require loads, without transpiling it: it must be CommonJS and use no import/export.
  const manifest = JSON.parse(readFileSync(path.join(HERE, "package.json"), "utf8"));
  const entry = path.join(HERE, manifest.miniprogram, "index.js");
  const source = readFileSync(entry, "utf8");
  assert.ok(!/^\s*(import|export)\s/m.test(source), "an ES module where WeChat requires CommonJS");
  assert.match(source, /module\.exports = \{/);
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
  const entries = JSON.stringify(manifest.exports).match(/"\.\/[^"]+"/g).map((e) => JSON.parse(e).replace("./", ""));
  for (const entry of entries) assert.ok(files.includes(entry), entry);
  assert.ok(files.includes(`${manifest.miniprogram}/index.js`), "the miniprogram folder is shipped");
  assert.ok(files.includes("CHANGELOG.md") && !files.some((f) => f.startsWith("test/")), files.join(","));
});
