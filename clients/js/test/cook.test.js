// The client against a real `chuixiang serve`: success, a dropped connection after the POST, abort, 429 then
// admitted, and the drain's 503 across a restart. One serve (one slot), the tests in order.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";

import { ApiUnreachableError, createClient, fetchRequest } from "../index.js";
import { recording, startServe } from "./serve.js";

/** One job at a time, any number per caller: the 429 test needs a full house from one address. */
// One job at a time, written whole: a job then streams for ~5 s at this pace, long enough to hold the one slot
// (the 429 test) and to keep a draining server up (the drain test); in sections it would be done in ~1 s.
const OVERRIDES = { RecipeConcurrency: "1", RecipeConcurrencyPerCaller: "0", RecipeSections: "whole" };
const ARGS = ["--fake-pace-ms", "5", "--drain-seconds", "3"];
/** @type {Awaited<ReturnType<typeof startServe>>} */
let serve;

before(async () => {
  serve = await startServe({ overrides: OVERRIDES, args: ARGS });
});
after(async () => {
  await serve?.stop();
});

test("cooks a dish: every document to onProgress, in order, to SUCCEEDED", async () => {
  const { seam, log } = recording(fetchRequest);
  const seen = [];
  const job = await createClient({ baseUrl: serve.base, request: seam }).cook("番茄炒蛋", {
    onProgress: (doc) => seen.push(doc.status),
  });
  assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.error));
  assert.ok(job.recipe && job.image?.url, "a recipe and a picture");
  assert.equal(seen.at(-1), "SUCCEEDED");
  assert.ok(seen.includes("RUNNING") || seen.includes("PENDING"));
  const gets = log.filter((r) => r.method === "GET");
  for (let i = 1; i < gets.length; i++) {
    const asked = gets[i - 1].body?.pollAfterMs;
    assert.ok(gets[i].at - gets[i - 1].at >= asked - 50, `poll ${i} came ${gets[i].at - gets[i - 1].at} ms after, told ${asked}`);
  }
  assert.ok(gets.every((r) => r.url.startsWith(`${serve.base}/recipes/`)), "Location resolved against the API");
});

test("an answer lost after the POST: the retry, with the same Idempotency-Key, is the same job", async () => {
  let dropped = null;
  const proxy = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const headers = Object.fromEntries(
      ["content-type", "idempotency-key", "accept", "authorization"].filter((h) => req.headers[h]).map((h) => [h, String(req.headers[h])]),
    );
    const answer = await fetch(`${serve.base}${req.url}`, {
      method: req.method,
      headers,
      body: req.method === "POST" ? Buffer.concat(chunks) : undefined,
    });
    const text = await answer.text();
    if (req.method === "POST" && dropped === null) {
      dropped = { key: req.headers["idempotency-key"], jobId: JSON.parse(text).jobId };
      req.socket.destroy(); // the job was created; its answer never arrives
      return;
    }
    res.writeHead(answer.status, { "content-type": "application/json", ...(answer.headers.get("location") ? { location: answer.headers.get("location") } : {}) });
    res.end(text);
  });
  await new Promise((resolve) => proxy.listen(0, "127.0.0.1", () => resolve(undefined)));
  const { port } = /** @type {import("node:net").AddressInfo} */ (proxy.address());
  const { seam, log } = recording(fetchRequest);
  try {
    const job = await createClient({ baseUrl: `http://127.0.0.1:${port}`, request: seam }).cook("鱼香肉丝");
    assert.equal(job.status, "SUCCEEDED");
    assert.ok(dropped, "the first POST's answer was dropped");
    assert.equal(job.jobId, dropped.jobId, "the retry got the job the lost answer named");
    const posts = log.filter((r) => r.method === "POST");
    assert.equal(posts.length, 2);
    assert.ok(posts[0].error && posts[1].status === 202);
    assert.equal(posts[1].headers["idempotency-key"], dropped.key);
  } finally {
    proxy.closeAllConnections();
    proxy.close();
  }
});

test("abort: cook rejects at once with the signal's reason, mid-job", async () => {
  const controller = new AbortController();
  const started = Date.now();
  let abortedAt = 0;
  const cooking = createClient({ baseUrl: serve.base }).cook("红烧肉", {
    signal: controller.signal,
    onProgress: () => {
      abortedAt = Date.now();
      controller.abort();
    },
  });
  await assert.rejects(cooking, (error) => error.name === "AbortError");
  // At once: not at the next poll (pollAfterMs is seconds), whatever else the machine is doing.
  assert.ok(abortedAt > 0 && Date.now() - abortedAt < 1000, "rejected within a second of the abort");
  assert.ok(Date.now() - started < 5000);
  await createClient({ baseUrl: serve.base }).cook("红烧肉"); // the job ran on: let it end before the next test
});

test("429: Retry-After read and honoured, then admitted (the same key throughout)", async () => {
  let admitted;
  const holding = new Promise((resolve) => (admitted = resolve));
  const first = createClient({ baseUrl: serve.base }).cook("宫保鸡丁", { onProgress: () => admitted() });
  await holding; // the first holds the one slot (its 202 came back)
  const { seam, log } = recording(fetchRequest);
  const second = await createClient({ baseUrl: serve.base, request: seam }).cook("麻婆豆腐");
  assert.equal((await first).status, "SUCCEEDED");
  assert.equal(second.status, "SUCCEEDED");
  const posts = log.filter((r) => r.method === "POST");
  const refusals = posts.filter((r) => r.status === 429);
  assert.ok(refusals.length >= 1, `a 429 first: ${posts.map((p) => p.status)}`);
  for (let i = 0; i < posts.length - 1; i++) {
    if (posts[i].status !== 429) continue;
    const told = Number(posts[i].answerHeaders["retry-after"]) * 1000;
    assert.ok(posts[i + 1].at - posts[i].at >= told - 50, `came back ${posts[i + 1].at - posts[i].at} ms after, told ${told}`);
  }
  assert.equal(new Set(posts.map((p) => p.headers["idempotency-key"])).size, 1);
});

test("the drain's 503: Retry-After waited out, and the job made by the restarted server", async () => {
  const inFlight = createClient({ baseUrl: serve.base }).cook("水煮鱼"); // serve drains while a job runs
  await new Promise((r) => setTimeout(r, 500));
  const { seam, log } = recording(fetchRequest);
  serve.drain();
  await new Promise((r) => setTimeout(r, 300));
  const cooking = createClient({ baseUrl: serve.base, request: seam }).cook("回锅肉");
  await serve.exited;
  serve = await startServe({ port: serve.port, overrides: OVERRIDES, args: ARGS }); // the restart
  const job = await cooking;
  assert.equal(job.status, "SUCCEEDED");
  // (A local restart forgets every job: the one in flight may end SUCCEEDED or, polled after the restart, not
  // found. It only kept the first server draining.)
  await inFlight;
  const posts = log.filter((r) => r.method === "POST");
  assert.equal(posts[0].status, 503, JSON.stringify(posts.map((p) => p.status ?? String(p.error))));
  assert.equal(posts[0].body.error.code, "SERVICE_UNAVAILABLE");
  const told = Number(posts[0].answerHeaders["retry-after"]) * 1000;
  assert.ok(posts[1].at - posts[0].at >= told - 50);
  assert.equal(posts.at(-1).status, 202);
});

test("an API that never answers: ApiUnreachableError once the give-up time has passed", async () => {
  const client = createClient({ baseUrl: "http://127.0.0.1:9", giveUpMs: 2500 });
  const started = Date.now();
  await assert.rejects(client.cook("清蒸鱼"), (error) => error instanceof ApiUnreachableError && error.message.includes("网络"));
  assert.ok(Date.now() - started < 6000);
});
