// The demo page in headless Chromium against `chuixiang serve --demo-port`: a dish cooked end to end, the partial
// recipe before SUCCEEDED, the picture loading, a 429 honoured, a failing model's message; and what a page on
// an origin the API does not allow can do: nothing (issue: any web page could create jobs).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";

import { ROOT, freePort } from "../../clients/js/test/serve.js";
import { failingModel, foreignOrigin, launch, recordingProxy, startServe } from "./support.js";

let serve, model, browser, demoPort;

before(async () => {
  model = await failingModel();
  demoPort = await freePort();
  serve = await startServe({
    // One job at once (admission counts jobs, whatever the job's streams): a job held by another client fills it.
    overrides: { RecipeConcurrency: "1", RecipeConcurrencyPerCaller: "0" },
    args: ["--model-base-url", model.url, "--demo-port", String(demoPort)],
  });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await serve?.stop();
  model?.stop();
});

/** The demo page, fresh; every API answer it got, with when. */
async function demoPage() {
  const page = await browser.newPage({ viewport: { width: 720, height: 1100 } });
  const answers = [];
  page.on("response", (r) => {
    if (r.url().startsWith(serve.base)) answers.push({ at: Date.now(), method: r.request().method(), status: r.status(), retryAfter: r.headers()["retry-after"] });
  });
  await page.goto(`http://127.0.0.1:${demoPort}/`);
  return { page, answers };
}

async function cook(page, dish) {
  await page.fill("#dish", dish);
  await page.click("#go");
}

test("cooks a dish end to end: the partial recipe first, then the recipe and its picture", async () => {
  const { page } = await demoPage();
  await cook(page, "番茄炒蛋");
  // While the model writes, the page shows what the partial recipe holds, before the job has SUCCEEDED.
  await page.waitForSelector('#recipe[data-source="partial"]:not([hidden])', { timeout: 30_000 });
  assert.equal(await page.getAttribute("body", "data-state"), "cooking");
  assert.match(await page.textContent("#name"), /番茄炒蛋/);
  // Written in sections: each section's state is shown while it is written, the outline's step titles first.
  await page.waitForSelector('#sections:not([hidden]) li[data-section^="steps:"]', { timeout: 30_000 });
  assert.ok((await page.$$('#sections li[data-section="outline"]')).length === 1);
  await page.waitForSelector("#steps li", { timeout: 30_000 });
  await page.waitForSelector('body[data-state="succeeded"]', { timeout: 60_000 });
  assert.equal(await page.getAttribute("#recipe", "data-source"), "recipe");
  assert.ok((await page.$$("#ingredients li")).length > 0 && (await page.$$("#steps li")).length > 0);
  assert.equal(await page.textContent("#phase"), "做好了");
  assert.equal(await page.isHidden("#sections"), true); // the recipe replaced the sections' progress
  // The picture's URL works from the page: it loaded.
  await page.waitForFunction(() => {
    const img = /** @type {HTMLImageElement} */ (document.getElementById("picture"));
    return img && !img.hidden && img.complete && img.naturalWidth > 0;
  }, null, { timeout: 10_000 });
  const shot = process.env.UPDATE_SCREENSHOT ? path.join(ROOT, "docs", "demo.png") : path.join(ROOT, ".chuixiang", "demo.png");
  await page.screenshot({ path: shot, fullPage: true });
  await page.close();
});

test("a failing model: the job's Chinese message is shown, with its code", async () => {
  const { page } = await demoPage();
  await cook(page, "失败的菜");
  await page.waitForSelector('body[data-state="failed"]', { timeout: 60_000 });
  assert.equal(await page.getAttribute("#error", "data-code"), "RECIPE_UPSTREAM_ERROR");
  assert.match(await page.textContent("#error"), /[\u4e00-\u9fff]/);
  await page.close();
});

test("a 429: the page reads Retry-After (exposed by CORS), waits it out, then cooks", async () => {
  const held = await fetch(`${serve.base}/recipes`, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ dish: "占着位置的菜" }),
  });
  assert.equal(held.status, 202); // the one job slot, held by another client's job
  const { page, answers } = await demoPage();
  await cook(page, "宫保鸡丁");
  await page.waitForSelector('body[data-state="succeeded"]', { timeout: 90_000 });
  const posts = answers.filter((a) => a.method === "POST");
  const refused = posts.findIndex((a) => a.status === 429);
  assert.ok(refused >= 0, `a 429 first: ${posts.map((p) => p.status)}`);
  assert.ok(posts[refused].retryAfter, "Retry-After visible to the page");
  assert.ok(posts[refused + 1].at - posts[refused].at >= Number(posts[refused].retryAfter) * 1000 - 100);
  assert.equal(posts.at(-1).status, 202);
  await page.close();
});

test("a page on an origin not listed cannot start a job: no-cors POST and sendBeacon get 415, a JSON POST no preflight", async () => {
  const proxy = await recordingProxy(serve.base);
  const foreign = await foreignOrigin();
  const page = await browser.newPage();
  try {
    await page.goto(`${foreign.origin}/`);
    const body = JSON.stringify({ dish: "别人的菜" });
    await page.evaluate(async ({ url, body }) => {
      await fetch(url, { mode: "no-cors", method: "POST", body: new Blob([body]) }); // opaque: the page learns nothing
      navigator.sendBeacon(url, new Blob([body]));
    }, { url: `${proxy.base}/recipes`, body });
    const cors = await page.evaluate(async ({ url, body }) => {
      try {
        await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
        return "answered";
      } catch (error) {
        return String(error);
      }
    }, { url: `${proxy.base}/recipes`, body });
    for (let i = 0; i < 50 && proxy.seen.filter((s) => s.method === "POST").length < 2; i++) await new Promise((r) => setTimeout(r, 100));
    const posts = proxy.seen.filter((s) => s.method === "POST");
    assert.equal(posts.length, 2, JSON.stringify(proxy.seen)); // the no-cors fetch and the beacon; the JSON POST never left
    assert.ok(posts.every((p) => p.status === 415), JSON.stringify(posts));
    assert.match(cors, /TypeError/);
    const preflight = proxy.seen.find((s) => s.method === "OPTIONS");
    assert.ok(preflight && !preflight.acao, "the preflight allowed no origin");
  } finally {
    await page.close();
    proxy.stop();
    foreign.stop();
  }
});
