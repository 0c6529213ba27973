// A model that fails: the job ends FAILED and cook resolves to it, with the API's code and Chinese message;
// a refused dish is a FAILED document too.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";

import { createClient } from "../index.js";
import { startServe } from "./serve.js";

let model;
let serve;

before(async () => {
  model = http.createServer((req, res) => {
    req.resume();
    res.writeHead(500, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message: "upstream overloaded", type: "server_error" } }));
  });
  await new Promise((resolve) => model.listen(0, "127.0.0.1", () => resolve(undefined)));
  const url = `http://127.0.0.1:${model.address().port}/v1`;
  serve = await startServe({ args: ["--model-base-url", url] });
});
after(async () => {
  await serve?.stop();
  model?.close();
});

test("a FAILED job resolves (never rejects) with error.code and the Chinese message", async () => {
  const job = await createClient({ baseUrl: serve.base }).cook("糖醋排骨");
  assert.equal(job.status, "FAILED");
  assert.equal(job.error.code, "RECIPE_UPSTREAM_ERROR");
  assert.match(job.error.message, /[\u4e00-\u9fff]/);
});

test("a dish the API refuses: a FAILED document with the API's code", async () => {
  const job = await createClient({ baseUrl: serve.base }).cook("");
  assert.equal(job.status, "FAILED");
  assert.equal(job.error.code, "INVALID_DISH");
  assert.match(job.error.message, /[\u4e00-\u9fff]/);
});
