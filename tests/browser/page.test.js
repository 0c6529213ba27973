// The demo page in headless Chromium against `chuixiang serve --demo-port`: a dish cooked end to end, the partial
// recipe before SUCCEEDED, the picture loading, a 429 honoured, a failing model's message; and what a page on
// an origin the API does not allow can do: nothing (issue: any web page could create jobs).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";

import { ROOT, freePort, startServe, warmUp } from "../../clients/js/test/serve.js";
import { failingModel, foreignOrigin, launch, recordingProxy } from "./support.js";

let serve, model, browser, demoPort;

before(async () => {
  model = await failingModel();
  demoPort = await freePort();
  serve = await startServe({
    // One job at once (admission counts jobs, whatever the job's streams): a job held by another client fills it.
    // The failing dishes' 500s must not open the model's breaker for the tests after them, in any order.
    overrides: { RecipeConcurrency: "1", RecipeConcurrencyPerCaller: "0", BreakerFailureThreshold: "100" },
    args: ["--model-base-url", model.url, "--demo-port", String(demoPort)],
  });
  await Promise.all([warmUp(serve.base), launch().then((b) => (browser = b))]);
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

// --- what the page tells the user at each moment (docs/api.md's table), on a phone-sized screen -----------------
// Each state's screenshot is written to .chuixiang/demo-states/ (the test's output, kept by CI).
const STATES = path.join(ROOT, ".chuixiang", "demo-states");

async function phonePage() {
  const page = await browser.newPage({ viewport: { width: 375, height: 812 } });
  const seen = [];
  page.on("response", async (r) => {
    if (!r.url().startsWith(serve.base)) return;
    const answer = { method: r.request().method(), url: r.url(), status: r.status() };
    seen.push(answer);
    if (answer.method === "POST" && answer.status === 202) answer.jobId = (await r.json()).jobId;
  });
  // Everything the live region says, in order.
  await page.addInitScript(() => {
    window.__announced = [];
    new MutationObserver(() => {
      const text = document.getElementById("announce")?.textContent;
      if (text && text !== window.__announced.at(-1)) window.__announced.push(text);
    }).observe(document, { subtree: true, childList: true, characterData: true });
  });
  await page.goto(`http://127.0.0.1:${demoPort}/`);
  return { page, seen };
}

const shot = (page, name) => page.screenshot({ path: path.join(STATES, `${name}.png`), fullPage: true });

test("writing, drawing, done: the ETA while written, the placeholder while drawn, the extras, each stage said once", async () => {
  const { page } = await phonePage();
  await cook(page, "鱼香肉丝");
  await page.waitForFunction(() => /约 \d+ 秒/.test(document.getElementById("eta").textContent), null, { timeout: 45_000 });
  await shot(page, "writing");
  await page.waitForSelector('#placeholder[data-state="drawing"]:not([hidden])', { timeout: 60_000 });
  await shot(page, "drawing");
  await page.waitForSelector('body[data-state="succeeded"]', { timeout: 60_000 });
  await page.waitForFunction(() => document.getElementById("picture").naturalWidth > 0, null, { timeout: 10_000 });
  assert.equal(await page.isHidden("#placeholder"), true);
  assert.equal(await page.isVisible("#extras"), true);
  assert.ok((await page.$$("#pairings li")).length > 0 && (await page.$$("#nutrition li")).length === 4);
  assert.equal(await page.isHidden("#cancel"), true);
  await shot(page, "succeeded");
  const announced = await page.evaluate(() => window.__announced);
  assert.ok(announced.includes("开始写菜谱") && announced.at(-1).startsWith("做好了："), announced.join(" | "));
  assert.ok(!announced.some((t) => /\d+%/.test(t)), "no percent is read out");
  assert.equal(new Set(announced).size, announced.length, "each stage once");
  await page.close();
});

test("queued: a 429's countdown is shown, then the job cooks", async () => {
  const held = await fetch(`${serve.base}/recipes`, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ dish: "排在前面的菜" }),
  });
  assert.equal(held.status, 202);
  const { page } = await phonePage();
  await cook(page, "回锅肉");
  await page.waitForSelector('#wait[data-state="queued"]:not([hidden])', { timeout: 10_000 });
  assert.match(await page.textContent("#wait"), /排队中，\d+ 秒后自动再试/);
  await shot(page, "queued");
  await page.waitForSelector('body[data-state="succeeded"]', { timeout: 90_000 });
  assert.equal(await page.isHidden("#wait"), true);
  await page.close();
});

test("offline: the page says so and counts down, and the job goes on once the network is back", async () => {
  const { page } = await phonePage();
  await cook(page, "葱爆羊肉");
  await page.waitForSelector('#recipe:not([hidden])', { timeout: 45_000 });
  await page.route(`${serve.base}/**`, (route) => route.abort("internetdisconnected"));
  await page.waitForSelector('#wait[data-state="offline"]:not([hidden])', { timeout: 20_000 });
  assert.match(await page.textContent("#wait"), /网络不通，\d+ 秒后自动重试/);
  assert.equal(await page.getAttribute("body", "data-state"), "cooking");
  await shot(page, "offline");
  await page.unroute(`${serve.base}/**`);
  await page.waitForSelector('body[data-state="succeeded"]', { timeout: 90_000 });
  await page.close();
});

test("a retryable failure offers a retry, which cooks the dish again", async () => {
  const { page, seen } = await phonePage();
  await cook(page, "失败的红烧肉");
  await page.waitForSelector('body[data-state="failed"]', { timeout: 60_000 });
  assert.equal(await page.isVisible("#retry"), true); // RECIPE_UPSTREAM_ERROR is retryable
  await shot(page, "failed");
  const posts = () => seen.filter((s) => s.method === "POST").length;
  const before = posts();
  await page.click("#retry");
  await page.waitForSelector('body[data-state="cooking"]', { timeout: 5_000 });
  await page.waitForSelector('body[data-state="failed"]', { timeout: 60_000 });
  assert.ok(posts() > before, "the retry started the dish again");
  await page.close();
});

test("cancel stops following the job and says so", async () => {
  const { page, seen } = await phonePage();
  await cook(page, "水煮鱼");
  await page.waitForSelector("#cancel:not([hidden])");
  // Cancel once the job exists and is followed (a cancel before that only stops the POST).
  for (let i = 0; i < 300 && !seen.some((a) => a.jobId); i++) await new Promise((r) => setTimeout(r, 100));
  await page.waitForFunction(() => document.getElementById("phase").textContent.startsWith("正在"), null, { timeout: 30_000 });
  await page.click("#cancel");
  await page.waitForSelector('body[data-state="cancelled"]', { timeout: 10_000 });
  assert.equal(await page.textContent("#phase"), "已取消");
  const after = seen.length;
  await new Promise((r) => setTimeout(r, 4_000)); // longer than a poll interval: no poll follows a cancel
  assert.equal(seen.length, after);
  await page.close();
  // The job itself goes on (a cancel stops the page, not the kitchen) and holds the one job slot until a poll
  // reads its end: read it, as the next visit's resume would, so the next test's job is admitted.
  const { jobId } = seen.find((a) => a.jobId);
  for (let doc = {}; !["SUCCEEDED", "FAILED"].includes(doc.status); await new Promise((r) => setTimeout(r, 500))) {
    doc = await (await fetch(`${serve.base}/recipes/${jobId}`)).json();
  }
});

test("a picture link that answers 403 is fetched again from a new poll", async () => {
  const { page, seen } = await phonePage();
  let refused = 0;
  await page.route("**/*", (route) => {
    if (route.request().resourceType() !== "image") return route.continue();
    if (refused++ === 0) return route.fulfill({ status: 403, body: "AccessDenied: Request has expired" });
    return route.continue();
  });
  await cook(page, "糖醋排骨");
  await page.waitForSelector('body[data-state="succeeded"]', { timeout: 90_000 });
  await page.waitForFunction(() => document.getElementById("picture").naturalWidth > 0, null, { timeout: 15_000 });
  assert.ok(refused >= 2, `the picture was asked for again (${refused})`);
  const polls = seen.filter((s) => s.method === "GET");
  assert.ok(polls.length >= 2 && polls.at(-1).status === 200);
  await page.close();
});

test("a long Latin name wraps inside a 375 px screen, and a right-to-left name keeps its direction", async () => {
  const { page } = await phonePage();
  const long = "Supercalifragilisticexpialidociousnoodlesoup";
  await page.evaluate((name) => {
    const recipe = document.getElementById("recipe");
    recipe.hidden = false;
    document.getElementById("name").textContent = name;
    document.getElementById("summary").textContent = "كبسة 2 人份";
  }, long);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow} px`);
  const direction = await page.evaluate(() => getComputedStyle(document.getElementById("summary")).direction);
  assert.equal(direction, "rtl"); // dir="auto": the first strong character is Arabic
  await shot(page, "long-and-rtl");
  await page.close();
});
