// The sample mini-program's page (clients/miniprogram/pages/cook) in the phone's runtime: `Page`, `getApp`,
// `require` and `wx` as the mini-program framework gives them, nothing else; cooking against `chuixiang serve`.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import vm from "node:vm";

import { CLIENT, MINIPROGRAM_COPY, toCommonJs } from "../cjs.js";
import { ROOT, startServe } from "./serve.js";
import { wxStub } from "./wx-runtime.js";

const APP = path.join(ROOT, "clients", "miniprogram");
let serve;

before(async () => {
  serve = await startServe({ overrides: { RecipeSections: "whole" }, args: ["--fake-pace-ms", "2"] });
});
after(async () => {
  await serve?.stop();
});

/** The page as the framework runs it: its module evaluated with `require` for its relative files, `Page` taking
 * its definition; an instance whose `setData` merges into `data`. */
function loadPage(apiBase) {
  let definition;
  const context = vm.createContext({
    setTimeout, clearTimeout, setInterval, clearInterval, console, wx: wxStub(),
    Page: (d) => (definition = d),
    getApp: () => ({ globalData: { apiBase } }),
  });
  const cache = {};
  function load(file) {
    if (cache[file]) return cache[file].exports;
    const module = (cache[file] = { exports: {} });
    const wrapper = vm.runInContext(`(function (module, exports, require) {\n${readFileSync(file, "utf8")}\n})`, context, { filename: file });
    wrapper(module, module.exports, (rel) => load(path.resolve(path.dirname(file), rel)));
    return module.exports;
  }
  const exported = load(path.join(APP, "pages", "cook", "cook.js"));
  const page = Object.assign(Object.create(definition), { data: { ...definition.data } });
  page.setData = (patch) => Object.assign(page.data, patch);
  page.onLoad();
  return { page, view: exported.view };
}

test("the page cooks a dish and shows the recipe and its picture", async () => {
  const { page } = loadPage(serve.base);
  const shown = [];
  const setData = page.setData;
  page.setData = (patch) => {
    setData(patch);
    if (patch.status) shown.push(patch.status);
  };
  page.onInput({ detail: { value: "番茄炒蛋" } });
  await page.onCook();
  assert.equal(page.data.cooking, false);
  assert.match(page.data.name, /番茄炒蛋/);
  assert.ok(page.data.ingredients.length > 0 && page.data.steps.length > 0);
  assert.ok(page.data.imageUrl, "the picture");
  assert.equal(page.data.error, "");
  assert.ok(shown.includes("正在提交…"), shown.join(" | "));
});

test("what each document shows, as docs/api.md's table says", () => {
  const { view } = loadPage("http://unused");
  assert.equal(view({ status: "RUNNING", stage: "recipe", progress: { percent: 40, etaMs: 50_000 } }).eta, "约 50 秒");
  const partial = view({ status: "RUNNING", stage: "recipe", partial: { name: "红烧肉", stepTitles: ["焯水", "炒糖色"] } });
  assert.deepEqual([partial.name, partial.steps], ["红烧肉", ["焯水", "炒糖色"]]);
  const noPicture = view({ status: "SUCCEEDED", recipe: { name: "x" }, image: null, imageError: { code: "IMAGE_TIMEOUT" } });
  assert.equal(noPicture.imagePlaceholder, true);
  assert.equal(view({ status: "SUCCEEDED", recipe: { name: "x" }, degraded: ["extras"] }).showExtras, false);
  const failed = view({ status: "FAILED", error: { code: "RECIPE_TIMEOUT", message: "搭配师走神了，再试一次。", retryable: true } });
  assert.deepEqual([failed.error, failed.retryable], ["搭配师走神了，再试一次。", true]);
  const refused = view({ status: "FAILED", error: { code: "INVALID_DISH", message: "菜名…", retryable: false } });
  assert.equal(refused.retryable, false); // no retry button for a dish that will fail again
});

test("the sample's copy of the client is the client (node clients/js/cjs.js)", () => {
  assert.equal(readFileSync(MINIPROGRAM_COPY, "utf8"), toCommonJs(readFileSync(CLIENT, "utf8")));
});
