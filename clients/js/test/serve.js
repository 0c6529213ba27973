// `chuixiang serve` for the client's tests, ready when it answers: started as a developer starts it, or forked by
// the command root `make` starts the Node tiers under (chuixiang_local.commands.launch: the same serve, ~1.5 s of CPU
// less to start).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import path from "node:path";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const PYTHON = process.env.CHUIXIANG_PYTHON || path.join(ROOT, ".venv", "bin", "python");

/** A port nobody listens on now. @returns {Promise<number>} */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = /** @type {import("node:net").AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
  });
}

/**
 * The tests' stacks write progress eight times as often as the template's default (2 s): every `pollAfterMs` the
 * API answers is in proportion to it, so a client following it waits an eighth as long. What the client does with
 * each document is the same at any interval.
 */
export const TEST_PROGRESS_INTERVAL_MS = "250";

/**
 * Start serve; resolves once it answers. `overrides`: template parameters (over `ProgressIntervalMs` above);
 * `args`: more serve arguments.
 * @param {{port?: number, overrides?: Record<string, string>, args?: string[]}} [options]
 */
export async function startServe({ port, overrides = {}, args = [] } = {}) {
  port ??= await freePort();
  const params = Object.entries({ ProgressIntervalMs: TEST_PROGRESS_INTERVAL_MS, ...overrides })
    .map(([k, v]) => `${k}=${v}`);
  const child = spawn(
    PYTHON,
    ["-m", "chuixiang_local.commands.launch", "serve", "--port", String(port), ...args,
      ...(params.length ? ["--parameter-overrides", ...params] : [])],
    { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const base = `http://127.0.0.1:${port}`;
  const started = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`serve exited ${child.exitCode}: ${stderr}`);
    try {
      await fetch(`${base}/recipes/none`);
      break;
    } catch {
      if (Date.now() - started > 90_000) throw new Error(`serve did not answer in 90 s: ${stderr}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  // Once serve has exited, its stderr may stay open in a child it left behind: let go of it, or this process
  // never exits.
  const exited = new Promise((resolve) => child.once("exit", (code) => { child.stderr.destroy(); resolve(code); }));
  return {
    base,
    port,
    child,
    output: () => stderr,
    /** SIGTERM: serve drains (new jobs 503 + Retry-After), then exits. */
    drain: () => child.kill("SIGTERM"),
    exited,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * The default request seam, recording every request and answer (with when), to check what the client did.
 * @param {import("../index.js").RequestFn} request
 */
export function recording(request) {
  /** @type {{at: number, method: string, url: string, headers: Record<string, string>, status?: number,
   *   answerHeaders?: Record<string, string>, body?: any, error?: unknown}[]} */
  const log = [];
  /** @type {import("../index.js").RequestFn} */
  const seam = async (req) => {
    const entry = { at: Date.now(), method: req.method, url: req.url, headers: req.headers };
    log.push(entry);
    try {
      const answer = await request(req);
      Object.assign(entry, { status: answer.status, answerHeaders: answer.headers, body: answer.body });
      return answer;
    } catch (error) {
      Object.assign(entry, { error });
      throw error;
    }
  };
  return { seam, log };
}

/**
 * The jobs that must end before admission's `Retry-After` is a typical job's measured length rather than its
 * default (120 s, advertised as at most 30 s): `MIN_SAMPLES` of layers/shared/chuixiang/stores/job_times.py, read there.
 */
const MEASURED_AFTER_JOBS = Number(
  /^MIN_SAMPLES = (\d+)$/m.exec(readFileSync(path.join(ROOT, "layers/shared/chuixiang/stores/job_times.py"), "utf8"))[1],
);

/**
 * `MEASURED_AFTER_JOBS` dishes cooked through the API one after another, each to its end, before a file's tests: they
 * meet warm Lambda sandboxes and an admission that has measured its jobs, as a deployed stack's users mostly do. The first
 * job's cold starts (each function's zygote importing the layer) took over 30 s once on a 2-core machine busy with
 * every tier starting at the same moment; and before `MEASURED_AFTER_JOBS` jobs had ended, a refused client was told
 * to come back in 30 s for a slot freed in three (the 429 tests waited that out: ~60 s of the Node lane). Their
 * outcome is not the tests' subject (a starved machine may fail one at a cold start; then a 429 is only told later).
 * @param {string} base
 */
export async function warmUp(base) {
  for (let i = 0; i < MEASURED_AFTER_JOBS; i++) {
    const created = await fetch(`${base}/recipes`, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ dish: `预热的菜${i + 1}` }),
    });
    if (created.status !== 202) throw new Error(`warm-up: ${created.status} ${await created.text()}`);
    const { jobId } = await created.json();
    const until = Date.now() + 180_000;
    for (;;) {
      const doc = await (await fetch(`${base}/recipes/${jobId}`)).json();
      if (doc.pollAfterMs === null) break;
      if (Date.now() > until) throw new Error(`warm-up job ${jobId} did not end: ${JSON.stringify(doc)}`);
      await new Promise((resolve) => setTimeout(resolve, doc.pollAfterMs));
    }
  }
}
