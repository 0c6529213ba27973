// The client in a mini-program's runtime (see wx-runtime.js) against a real `chuixiang serve`: a dish cooked, a
// 429 waited out under one Idempotency-Key, an answer lost after the POST, an abort, a stuck request bounded.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";

import { startServe, warmUp } from "./serve.js";
import { loadClient, miniProgramContext, wxStub } from "./wx-runtime.js";

const OVERRIDES = { RecipeConcurrency: "1", RecipeConcurrencyPerCaller: "0", RecipeSections: "whole" };
let serve;

before(async () => {
  serve = await startServe({ overrides: OVERRIDES, args: ["--fake-pace-ms", "5"] });
  await warmUp(serve.base); // the 429's Retry-After: a measured job's length, not 30 s
});
after(async () => {
  await serve?.stop();
});

function phone(hooks) {
  const wx = wxStub(hooks);
  const context = miniProgramContext(wx);
  for (const name of ["URL", "AbortController", "DOMException", "fetch", "TextEncoder"]) {
    assert.equal(vm_has(context, name), false, `${name} must not exist on a phone`);
  }
  return { wx, client: loadClient(context) };
}

function vm_has(context, name) {
  return Object.prototype.hasOwnProperty.call(context, name) || typeof context[name] !== "undefined";
}

test("a dish cooked through wx.request, with the page told what is happening", async () => {
  const { wx, client } = phone();
  const states = [];
  const job = await client.createClient({ baseUrl: serve.base }).cook("番茄炒蛋", {
    onStatus: (s) => states.push(s.state),
    onProgress: () => {
      throw new Error("a page bug");  // the job goes on
    },
  });
  assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.error));
  assert.ok(job.recipe && job.image?.url);
  assert.equal(states[0], "submitting");
  assert.equal(states.at(-1), "done");
  assert.ok(states.some((s) => s === "waiting" || s === "writing"), states.join(","));
  assert.ok(wx.requests.every((r) => r.url.startsWith(`${serve.base}/recipes`)));
});

test("a 429 waited out under one Idempotency-Key, the page told it is queued and until when", async () => {
  const { client } = phone();
  let admitted;
  const holding = new Promise((resolve) => (admitted = resolve));
  const first = client.createClient({ baseUrl: serve.base }).cook("宫保鸡丁", { onProgress: () => admitted() });
  await holding;
  const { wx, client: second } = phone();
  const queued = [];
  const job = await second.createClient({ baseUrl: serve.base }).cook("麻婆豆腐", {
    onStatus: (s) => s.state === "queued" && queued.push(s.retryAt),
  });
  assert.equal((await first).status, "SUCCEEDED");
  assert.equal(job.status, "SUCCEEDED");
  const posts = wx.requests.filter((r) => r.method === "POST");
  assert.ok(posts.some((p) => p.status === 429) && queued.length >= 1 && queued[0] > Date.now() - 60_000);
  assert.equal(new Set(posts.map((p) => p.header["idempotency-key"])).size, 1);
});

test("an answer lost after the POST: the retry is the same job", async () => {
  let dropped = 0;
  const { wx, client } = phone({ before: (o) => (o.method === "POST" && dropped++ === 0 ? "drop" : undefined) });
  const job = await client.createClient({ baseUrl: serve.base }).cook("鱼香肉丝");
  assert.equal(job.status, "SUCCEEDED");
  const posts = wx.requests.filter((r) => r.method === "POST");
  assert.equal(posts.length, 2);
  assert.equal(posts[0].header["idempotency-key"], posts[1].header["idempotency-key"]);
});

test("an abort without AbortController: cancellable() rejects cook at once", async () => {
  const { client } = phone();
  const c = client.cancellable();
  let abortedAt = 0;
  const cooking = client.createClient({ baseUrl: serve.base }).cook("红烧肉", {
    signal: c.signal,
    onProgress: () => {
      abortedAt = Date.now();
      c.cancel();
    },
  });
  await assert.rejects(cooking, (error) => error.name === "AbortError");
  assert.ok(abortedAt > 0 && Date.now() - abortedAt < 1000);
  await client.createClient({ baseUrl: serve.base }).cook("红烧肉"); // let it end before the next test
});

test("a request accepted and never answered is bounded; giveUpMs bounds the whole cook", async () => {
  const silent = http.createServer(() => {}); // accepts, never answers
  await new Promise((r) => silent.listen(0, "127.0.0.1", r));
  const { port } = silent.address();
  try {
    const { wx, client } = phone();
    const started = Date.now();
    const cooking = client.createClient({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 500, giveUpMs: 3000 }).cook("清蒸鱼");
    await assert.rejects(cooking, (error) => error.name === "ApiUnreachableError");
    const took = Date.now() - started;
    // Each stuck request cut at timeoutMs and asked again; it gives up once the next try could not come before
    // giveUpMs (not after it).
    assert.ok(took < 3000 + 500, `gave up after ${took} ms`);
    assert.ok(wx.requests.length >= 2, "it asked again after a stuck request");
    assert.ok(wx.requests.every((r, i) => i === 0 || r.at - wx.requests[i - 1].at >= 500), "each request waited its timeout");
  } finally {
    silent.closeAllConnections();
    silent.close();
  }
});

test("on a phone: the client's functions taken off it, getToken told whether to refresh, a failed sign-in ends UNAUTHORIZED", async () => {
  const { wx, client } = phone();
  const asked = [];
  const { cook } = client.createClient({
    baseUrl: serve.base,
    getToken: (options) => {
      asked.push(options.forceRefresh);
      return "phone-token";
    },
  });
  const job = await cook("回锅肉");
  assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.error));
  assert.ok(asked.length > 0 && asked.every((f) => f === false), asked.join()); // no 401: never asked to refresh
  const before = wx.requests.length;
  const { cook: signedOut } = client.createClient({
    baseUrl: serve.base,
    getToken: () => Promise.reject(new Error("wx.login:fail")),
  });
  const refused = await signedOut("水煮鱼");
  assert.equal(refused.status, "FAILED");
  assert.equal(refused.error.code, "UNAUTHORIZED");
  assert.equal(wx.requests.length, before); // no request sent without a token
});
