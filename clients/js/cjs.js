// The client as a CommonJS script, as a mini-program's `require` loads it (and as the devtools' ES6-to-ES5 step
// turns an ES module into one): `node clients/js/cjs.js` writes the package's CommonJS entry (index.cjs) and the
// sample mini-program's copy (clients/miniprogram/lib/chuixiang.js); a test keeps both current.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const CLIENT = path.join(HERE, "index.js");
export const MINIPROGRAM_COPY = path.join(HERE, "..", "miniprogram", "lib", "chuixiang.js");
/** The package's CommonJS entry (`require("@chuixiang/client")`). */
export const CJS_ENTRY = path.join(HERE, "index.cjs");

/** The names an ES module exports (`export function|class|const name`). @param {string} source */
export function exportedNames(source) {
  return [...source.matchAll(/^export (?:async )?(?:function|class|const) ([A-Za-z_$][\w$]*)/gm)].map((m) => m[1]);
}

/** `source` without its `export` keywords: the module's body as plain declarations. @param {string} source */
export function body(source) {
  return source.replace(/^export (?=(?:async )?(?:function|class|const) )/gm, "");
}

/** `source` as a CommonJS module. @param {string} source */
export function toCommonJs(source) {
  return `// Generated from clients/js/index.js by \`node clients/js/cjs.js\`: do not edit.\n${body(source)}\nmodule.exports = { ${exportedNames(source).join(", ")} };\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const target of [MINIPROGRAM_COPY, CJS_ENTRY]) writeFileSync(target, toCommonJs(readFileSync(CLIENT, "utf8")));
}
