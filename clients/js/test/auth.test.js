// Rules a real server rarely shows on cue, against a scripted transport: a token that expires (401 →
// a fresh token from getToken, the job goes on), a token that cannot be fixed (UNAUTHORIZED, retryable), and an
// API behind a base path (`Location: /recipes/{id}` resolved under `/api`).
import { test } from "node:test";
import assert from "node:assert/strict";

import { createClient } from "../index.js";

const future = () => new Date(Date.now() + 60_000).toISOString();

/** A transport answering from `script` in order, recording what it was asked. */
function scripted(script) {
  const asked = [];
  return {
    asked,
    request: async (req) => {
      asked.push(req);
      const next = script.shift();
      if (!next) throw new Error("unscripted request");
      return { status: next.status, headers: next.headers ?? {}, body: next.body ?? null };
    },
  };
}

test("a token that expires mid-job: getToken is asked before every request, a 401 retried with the new one", async () => {
  let n = 0;
  const { asked, request } = scripted([
    { status: 401, body: { message: "Unauthorized" } },
    { status: 202, headers: { location: "/recipes/j1" }, body: { jobId: "j1", status: "PENDING", pollAfterMs: 10, deadlineAt: future() } },
    { status: 401, body: { message: "Unauthorized" } },
    { status: 200, body: { jobId: "j1", status: "SUCCEEDED", pollAfterMs: null, deadlineAt: future(), recipe: {} } },
  ]);
  const client = createClient({ baseUrl: "https://api.example.cn", request, getToken: () => `t${++n}` });
  const job = await client.cook("番茄炒蛋");
  assert.equal(job.status, "SUCCEEDED");
  assert.deepEqual(asked.map((r) => r.headers.authorization), ["Bearer t1", "Bearer t2", "Bearer t3", "Bearer t4"]);
  assert.ok(asked.every((r) => r.timeoutMs > 0), "every request bounded");
});

test("a 401 a new token does not fix: FAILED UNAUTHORIZED, retryable (sign in again), never BAD_REQUEST", async () => {
  const { request } = scripted([{ status: 401 }, { status: 401 }]);
  const job = await createClient({ baseUrl: "https://api.example.cn", request, getToken: () => "stale" }).cook("鱼香肉丝");
  assert.equal(job.status, "FAILED");
  assert.equal(job.error.code, "UNAUTHORIZED");
  assert.equal(job.error.retryable, true);
  assert.match(job.error.message, /登录/);
});

test("behind a base path: the API's Location is resolved under it, not at the host's root", async () => {
  const { asked, request } = scripted([
    { status: 202, headers: { location: "/recipes/j2" }, body: { jobId: "j2", status: "PENDING", pollAfterMs: 10, deadlineAt: future() } },
    { status: 200, body: { jobId: "j2", status: "SUCCEEDED", pollAfterMs: null, deadlineAt: future() } },
  ]);
  await createClient({ baseUrl: "https://example.cn/api", request }).cook("回锅肉");
  assert.deepEqual(asked.map((r) => r.url), ["https://example.cn/api/recipes", "https://example.cn/api/recipes/j2"]);
});

test("resume: a reloaded page picks its job up again by id", async () => {
  const { asked, request } = scripted([
    { status: 200, body: { jobId: "j3", dish: "水煮鱼", status: "RUNNING", stage: "image", pollAfterMs: 10, deadlineAt: future() } },
    { status: 200, body: { jobId: "j3", status: "SUCCEEDED", pollAfterMs: null, deadlineAt: future() } },
  ]);
  const states = [];
  const job = await createClient({ baseUrl: "https://example.cn/api/", request }).resume("j3", {
    onStatus: (s) => states.push(s.state),
  });
  assert.equal(job.status, "SUCCEEDED");
  assert.deepEqual(asked.map((r) => r.url), ["https://example.cn/api/recipes/j3", "https://example.cn/api/recipes/j3"]);
  assert.deepEqual([states[0], states.at(-1)], ["drawing", "done"]);
});

test("after a 401 getToken is told to refresh, once: the token an app keeps in storage was refused", async () => {
  const calls = [];
  const { asked, request } = scripted([
    { status: 401 },
    { status: 202, headers: { location: "/recipes/j5" }, body: { jobId: "j5", status: "PENDING", pollAfterMs: 10, deadlineAt: future() } },
    { status: 401 },
    { status: 200, body: { jobId: "j5", status: "SUCCEEDED", pollAfterMs: null, deadlineAt: future() } },
  ]);
  const getToken = async ({ forceRefresh }) => {
    calls.push(forceRefresh);
    return forceRefresh ? "fresh" : "kept";
  };
  const job = await createClient({ baseUrl: "https://api.example.cn", request, getToken }).cook("番茄炒蛋");
  assert.equal(job.status, "SUCCEEDED");
  assert.deepEqual(calls, [false, true, false, true]);
  assert.deepEqual(asked.map((r) => r.headers.authorization), ["Bearer kept", "Bearer fresh", "Bearer kept", "Bearer fresh"]);
});

test("a getToken that rejects (the sign-in failed) ends the job UNAUTHORIZED at once, not retried as the network", async () => {
  const { asked, request } = scripted([]);
  const started = Date.now();
  const statuses = [];
  const job = await createClient({
    baseUrl: "https://api.example.cn",
    request,
    getToken: async () => {
      throw new Error("wx.login failed");
    },
  }).cook("番茄炒蛋", { onStatus: (s) => statuses.push(s.state) });
  assert.equal(job.status, "FAILED");
  assert.equal(job.error.code, "UNAUTHORIZED");
  assert.equal(job.error.retryable, true);
  assert.equal(asked.length, 0); // no request without a token
  assert.ok(Date.now() - started < 500, "at once");
  assert.ok(!statuses.includes("offline") && statuses.at(-1) === "done", statuses.join());
});

test("the client's functions work taken off it: const { cook, getJob, resume } = client", async () => {
  const { request } = scripted([
    { status: 200, body: { jobId: "j6", dish: "水煮鱼", status: "SUCCEEDED", pollAfterMs: null, deadlineAt: future() } },
    { status: 200, body: { jobId: "j6", dish: "水煮鱼", status: "SUCCEEDED", pollAfterMs: null, deadlineAt: future() } },
  ]);
  const { getJob, resume } = createClient({ baseUrl: "https://api.example.cn", request });
  assert.equal((await resume("j6")).status, "SUCCEEDED");
  assert.equal((await getJob("j6")).status, "SUCCEEDED");
});

test("a 429 whose Retry-After runs past giveUpMs ends at once as TOO_MANY_JOBS, not slept out", async () => {
  const { asked, request } = scripted([
    { status: 429, headers: { "retry-after": "30" }, body: { error: { code: "TOO_MANY_JOBS", message: "现在做菜的人太多了，请稍后再试。" } } },
  ]);
  const started = Date.now();
  const job = await createClient({ baseUrl: "https://api.example.cn", request, giveUpMs: 5_000 }).cook("宫保鸡丁");
  assert.equal(job.status, "FAILED");
  assert.equal(job.error.code, "TOO_MANY_JOBS");
  assert.equal(job.error.retryable, true);
  assert.equal(asked.length, 1);
  assert.ok(Date.now() - started < 500, "at once");
});
