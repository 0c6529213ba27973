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
