// The sample mini-program's page (clients/miniprogram/pages/cook) in the phone's runtime: `Page`, `getApp`,
// `require` and `wx` as the mini-program framework gives them, nothing else; cooking against `chuixiang serve`.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
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
function loadPage(apiBase, { loginUrl = "", wx = wxStub() } = {}) {
  let definition;
  const context = vm.createContext({
    setTimeout, clearTimeout, setInterval, clearInterval, console, wx,
    Page: (d) => (definition = d),
    getApp: () => ({ globalData: { apiBase, loginUrl } }),
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
  return { page, view: exported.view, login: load(path.join(APP, "lib", "login.js")) };
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
  assert.equal(page.data.imagePlaceholder, "");
  assert.equal(page.data.showExtras, true);
  assert.ok(page.data.pairings.length > 0 && page.data.nutrition.length === 4, JSON.stringify(page.data.pairings));
  assert.equal(page.data.error, "");
  assert.ok(shown.includes("正在提交…"), shown.join(" | "));
});

test("what each document shows, as docs/api.md's table says", () => {
  const { view } = loadPage("http://unused");
  assert.equal(view({ status: "RUNNING", stage: "recipe", progress: { percent: 40, etaMs: 50_000 } }).eta, "约 50 秒");
  const partial = view({ status: "RUNNING", stage: "recipe", partial: { name: "红烧肉", stepTitles: ["焯水", "炒糖色"] } });
  assert.deepEqual([partial.name, partial.steps], ["红烧肉", ["焯水", "炒糖色"]]);
  const noPicture = view({ status: "SUCCEEDED", recipe: { name: "x" }, image: null, imageError: { code: "IMAGE_TIMEOUT" } });
  assert.equal(noPicture.imagePlaceholder, "成品图没画出来");
  const drawing = view({ status: "RUNNING", stage: "image", recipe: { name: "x" } });
  assert.deepEqual([drawing.imagePlaceholder, drawing.eta], ["成品图正在画…", ""]);
  const full = { name: "x", pairings: { side: "凉拌黄瓜", soup: "", staple: "米饭" }, nutrition: { caloriesKcal: 320, proteinG: 18, fatG: 20, carbsG: 12 } };
  const served = view({ status: "SUCCEEDED", recipe: full, degraded: null });
  assert.deepEqual([...served.pairings], ["配菜：凉拌黄瓜", "主食：米饭"]); // the page's realm: copied to compare
  assert.equal(served.nutrition[0], "热量 320 千卡");
  assert.equal(view({ status: "SUCCEEDED", recipe: full, degraded: ["extras"] }).showExtras, false);
  // The server's etaMs is as of progress.updatedAt: read 15 s later, 4.6 s are left, not 19.
  const now = Date.parse("2026-12-04T20:00:15Z");
  const aged = view({ status: "RUNNING", stage: "recipe", progress: { percent: 80, etaMs: 19_600, updatedAt: "2026-12-04T20:00:00Z" } }, now);
  assert.equal(aged.eta, "约 5 秒");
  const failed = view({ status: "FAILED", error: { code: "RECIPE_TIMEOUT", message: "搭配师走神了，再试一次。", retryable: true } });
  assert.deepEqual([failed.error, failed.retryable], ["搭配师走神了，再试一次。", true]);
  const refused = view({ status: "FAILED", error: { code: "INVALID_DISH", message: "菜名…", retryable: false } });
  assert.equal(refused.retryable, false); // no retry button for a dish that will fail again
});

test("the sample's copy of the client is the client (node clients/js/cjs.js)", () => {
  assert.equal(readFileSync(MINIPROGRAM_COPY, "utf8"), toCommonJs(readFileSync(CLIENT, "utf8")));
});


test("the sign-in behind getToken: wx.login's code traded once, the token kept, a refused one replaced", async () => {
  const codes = [];
  let answer = 200;
  const service = http.createServer((req, res) => {
    let text = "";
    req.on("data", (c) => (text += c));
    req.on("end", () => {
      codes.push(JSON.parse(text).code);
      res.writeHead(answer, { "content-type": "application/json" });
      res.end(JSON.stringify(answer === 200 ? { token: `token-for-${codes.at(-1)}` } : { error: "no" }));
    });
  });
  await new Promise((r) => service.listen(0, "127.0.0.1", r));
  const loginUrl = `http://127.0.0.1:${service.address().port}/wechat/login`;
  try {
    const wx = wxStub();
    const { login } = loadPage("http://unused", { loginUrl, wx });
    const getToken = login.loginTokens(wx, loginUrl);
    const [a, b] = await Promise.all([getToken({ forceRefresh: false }), getToken({ forceRefresh: false })]);
    assert.deepEqual([a, b, codes], ["token-for-code-1", "token-for-code-1", ["code-1"]]); // one sign-in, shared
    assert.equal(await getToken({ forceRefresh: false }), "token-for-code-1"); // kept in storage
    assert.equal(await getToken({ forceRefresh: true }), "token-for-code-2"); // the API refused it: sign in again
    assert.equal(wx.storage.get(login.STORAGE_KEY), "token-for-code-2");
    answer = 500;
    await assert.rejects(getToken({ forceRefresh: true }), /login service answered 500/);
    assert.equal(wx.storage.has(login.STORAGE_KEY), false); // no refused token left to hand out
  } finally {
    service.close();
  }
});

test("a failed sign-in ends the job UNAUTHORIZED without sending it", async () => {
  const wx = wxStub({ login: () => "fail" });
  const { page } = loadPage(serve.base, { loginUrl: "http://127.0.0.1:9/never", wx });
  page.onInput({ detail: { value: "番茄炒蛋" } });
  await page.onCook();
  assert.equal(page.data.cooking, false);
  assert.ok(page.data.error, "the sign-in failure is shown");
  assert.equal(wx.requests.filter((r) => r.url.startsWith(serve.base)).length, 0);
});

test("the sample names a real AppID slot, not touristappid (which cannot call the API's domain)", () => {
  const config = JSON.parse(readFileSync(path.join(APP, "project.config.json"), "utf8"));
  assert.notEqual(config.appid, "touristappid");
  assert.match(config.appid, /^wx[0-9a-f]{16}$/);
});
