// The Chuixiang API client: POST a dish, then poll its job to the end, following every rule of docs/api.md.
// An ES module with no dependencies; JSDoc types (checked by `tsc --checkJs` if you have it, not required).
//
//   import { createClient } from "./index.js";
//   const client = createClient({ baseUrl: "https://api.example.cn" });
//   const job = await client.cook("番茄炒蛋", { onProgress: (doc) => render(doc) });
//   job.status === "SUCCEEDED" ? show(job.recipe, job.image) : showError(job.error.message);

/**
 * @typedef {{code: string, message: string, reason?: string, retryable?: boolean}} ApiError
 * @typedef {{jobId: string, dish?: string, status: "PENDING"|"RUNNING"|"SUCCEEDED"|"FAILED", pollAfterMs: number|null,
 *   deadlineAt: string, stage?: string, recipe?: object|null, image?: {url: string, key: string}|null,
 *   imageError?: ApiError|null, error?: ApiError|null, progress?: object|null, partial?: object|null,
 *   degraded?: string[]|null}} JobDocument
 * @typedef {{method: "GET"|"POST", url: string, headers: Record<string, string>, body?: string,
 *   signal?: AbortSignal}} Request
 * @typedef {{status: number, headers: Record<string, string>, body: any}} Response
 *   `headers` with lower-case names; `body` the parsed JSON (null when there is none).
 * @typedef {(request: Request) => Promise<Response>} RequestFn
 *   Rejects only when no answer came (the network); any HTTP status resolves.
 */

/** How long a client keeps at a job before it gives up (ClientGiveUpSeconds: above the job's own deadline). */
export const GIVE_UP_MS = 360_000;
/** Waits after an unanswered request: 1 s, 2 s, 4 s… up to this. */
const MAX_BACKOFF_MS = 8_000;
/** A 429 or 503 without Retry-After: wait this long. */
const DEFAULT_RETRY_AFTER_MS = 5_000;

/** What the user reads when the API cannot be reached (the API's own codes carry the API's message). */
export const UNREACHABLE = Object.freeze({
  code: "API_UNREACHABLE",
  message: "网络不太好，暂时连不上服务器，请稍后再试。",
});

/** The API could not be reached for longer than the job may take: `cook` rejects with this. */
export class ApiUnreachableError extends Error {
  /** @param {unknown} cause */
  constructor(cause) {
    super(UNREACHABLE.message, { cause });
    this.name = "ApiUnreachableError";
    this.code = UNREACHABLE.code;
  }
}

/** @param {AbortSignal | undefined} signal */
function abortError(signal) {
  return signal?.reason instanceof Error ? signal.reason : new DOMException("cook was aborted", "AbortError");
}

/**
 * Wait `ms`, or reject at once when `signal` aborts.
 * @param {number} ms @param {AbortSignal} [signal] @returns {Promise<void>}
 */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal));
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    function onAbort() {
      clearTimeout(timer);
      reject(abortError(signal));
    }
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A version-4 UUID for the Idempotency-Key (crypto.randomUUID where there is one, as in browsers and Node). */
function newKey() {
  if (globalThis.crypto?.randomUUID) return globalThis.crypto.randomUUID();
  const hex = [...Array(32)].map(() => Math.floor(Math.random() * 16).toString(16));
  hex[12] = "4";
  hex[16] = ((parseInt(hex[16], 16) & 3) | 8).toString(16);
  const s = hex.join("");
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`;
}

/** The default request seam: `fetch`. @type {RequestFn} */
export async function fetchRequest({ method, url, headers, body, signal }) {
  const answer = await fetch(url, { method, headers, body, signal });
  const text = await answer.text();
  /** @type {Record<string, string>} */
  const named = {};
  answer.headers.forEach((value, name) => {
    named[name.toLowerCase()] = value;
  });
  return { status: answer.status, headers: named, body: text ? JSON.parse(text) : null };
}

/**
 * The request seam for a WeChat mini-program: `createClient({baseUrl, request: wxRequest(wx)})`.
 * wx.request is not subject to CORS; its `fail` is a network failure, any status is a `success`.
 * @param {{request: (options: object) => {abort: () => void}}} wx @returns {RequestFn}
 */
export function wxRequest(wx) {
  return ({ method, url, headers, body, signal }) =>
    new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(abortError(signal));
      const task = wx.request({
        url,
        method,
        header: headers,
        data: body,
        dataType: "json",
        success: (/** @type {any} */ r) => {
          /** @type {Record<string, string>} */
          const named = {};
          for (const [name, value] of Object.entries(r.header || {})) named[name.toLowerCase()] = String(value);
          resolve({ status: r.statusCode, headers: named, body: r.data === "" ? null : r.data });
        },
        fail: (/** @type {any} */ e) => reject(new Error(e?.errMsg || "wx.request failed")),
      });
      signal?.addEventListener("abort", () => task.abort(), { once: true });
    });
}

/** Seconds of a Retry-After header (delta-seconds or an HTTP date), in ms. @param {string|undefined} value */
function retryAfterMs(value, now = Date.now()) {
  if (!value) return DEFAULT_RETRY_AFTER_MS;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - now) : DEFAULT_RETRY_AFTER_MS;
}

/**
 * A terminal document for a job the API refused or lost (a 4xx): FAILED with the API's code and message.
 * @param {string} dish @param {any} body @param {string} [jobId] @returns {JobDocument}
 */
function refused(dish, body, jobId = "") {
  const error = body?.error ?? { code: "BAD_REQUEST", message: "请求有误。" };
  return { jobId, dish, status: "FAILED", pollAfterMs: null, deadlineAt: "", error: { ...error, retryable: false } };
}

/**
 * @param {{baseUrl: string, token?: string | (() => string | Promise<string>), request?: RequestFn,
 *   giveUpMs?: number}} options
 *   `token`: a bearer token (or a function returning one: it is asked before every request, so it may refresh).
 */
export function createClient({ baseUrl, token, request = fetchRequest, giveUpMs = GIVE_UP_MS }) {
  const base = new URL(baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`);

  /** @param {Partial<Request>} req @returns {Promise<Response>} */
  async function send(req) {
    /** @type {Record<string, string>} */
    const headers = { accept: "application/json", ...(req.headers || {}) };
    const bearer = typeof token === "function" ? await token() : token;
    if (bearer) headers.authorization = `Bearer ${bearer}`;
    return request(/** @type {Request} */ ({ ...req, headers }));
  }

  /**
   * Send until answered: an unanswered request is sent again after 1, 2, 4… s, until `until` (ms since the
   * epoch) has passed; then ApiUnreachableError. Each answer goes to `handle`, which returns a result to
   * stop with, or a wait in ms before sending again.
   * @template T
   * @param {() => Promise<Response>} once @param {(r: Response) => {done: T} | {waitMs: number}}
   *   handle @param {number} until @param {AbortSignal} [signal] @returns {Promise<T>}
   */
  async function persist(once, handle, until, signal) {
    let backoff = 1000;
    for (;;) {
      if (signal?.aborted) throw abortError(signal);
      let answer;
      try {
        answer = await once();
      } catch (error) {
        if (signal?.aborted) throw abortError(signal);
        if (Date.now() + backoff > until) throw new ApiUnreachableError(error);
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
        continue;
      }
      backoff = 1000;
      const next = handle(answer);
      if ("done" in next) return next.done;
      await sleep(next.waitMs, signal);
    }
  }

  /**
   * Start the dish's job (or join the one generating it): one Idempotency-Key for every try, so a retry after
   * a lost answer is the same job. 429 and 503 wait out Retry-After, keeping the caller's place in line.
   * @param {string} dish @param {string} key @param {number} until @param {AbortSignal} [signal]
   * @returns {Promise<{accepted: JobDocument, location: string} | {failed: JobDocument}>}
   */
  function start(dish, key, until, signal) {
    const body = JSON.stringify({ dish });
    const post = () =>
      send({
        method: "POST",
        url: new URL("recipes", base).href,
        headers: { "content-type": "application/json", "idempotency-key": key },
        body,
        signal,
      });
    return persist(
      post,
      (r) => {
        if (r.status === 202) {
          // Location is relative to the API, not to the page: resolve it against the base.
          const location = new URL(r.headers.location || `recipes/${r.body.jobId}`, base).href;
          return { done: { accepted: r.body, location } };
        }
        if (r.status === 429 || r.status === 503) return { waitMs: retryAfterMs(r.headers["retry-after"]) };
        if (r.status === 409) return { waitMs: 1000 }; // the same key's first request is still being answered
        if (r.status >= 500) return { waitMs: DEFAULT_RETRY_AFTER_MS };
        return { done: { failed: refused(dish, r.body) } };
      },
      until,
      signal,
    );
  }

  /**
   * Poll the job every `pollAfterMs` until it is terminal; every document to `onProgress`. Past its
   * `deadlineAt` one more poll (the API fails a job it finds late), and no more.
   * @param {string} dish @param {JobDocument} accepted @param {string} location @param {number} until
   * @param {(doc: JobDocument) => void} [onProgress] @param {AbortSignal} [signal] @returns {Promise<JobDocument>}
   */
  async function follow(dish, accepted, location, until, onProgress, signal) {
    const deadline = Date.parse(accepted.deadlineAt) || until;
    let doc = accepted;
    let waitMs = accepted.pollAfterMs ?? 3000;
    for (;;) {
      await sleep(Math.min(waitMs, Math.max(0, deadline - Date.now()) + 1000), signal);
      const late = Date.now() > deadline;
      const answer = await persist(
        () => send({ method: "GET", url: location, signal }),
        (r) => {
          if (r.status === 200) return { done: /** @type {JobDocument} */ (r.body) };
          if (r.status === 429 || r.status === 503 || r.status >= 500)
            return { waitMs: retryAfterMs(r.headers["retry-after"]) };
          return { done: refused(dish, r.body, accepted.jobId) };
        },
        Math.max(until, deadline + 60_000),
        signal,
      );
      doc = answer;
      onProgress?.(doc);
      if (doc.status === "SUCCEEDED" || doc.status === "FAILED" || doc.pollAfterMs === null) return doc;
      if (late) {
        const error = { code: "JOB_TIMED_OUT", message: "这道菜做得太久，已经停下了，再试一次。", retryable: true };
        return { ...doc, status: "FAILED", pollAfterMs: null, error };
      }
      waitMs = doc.pollAfterMs;
    }
  }

  return {
    /**
     * Cook `dish`: resolves to the final job document, SUCCEEDED or FAILED (with `error.code` and the
     * Chinese `error.message`; a refused request is a FAILED document too). Rejects only when `signal`
     * aborts, or with ApiUnreachableError when the API stays unreachable past the job's deadline.
     * @param {string} dish
     * @param {{onProgress?: (doc: JobDocument) => void, signal?: AbortSignal, idempotencyKey?: string}} [options]
     * @returns {Promise<JobDocument>}
     */
    async cook(dish, { onProgress, signal, idempotencyKey } = {}) {
      const until = Date.now() + giveUpMs;
      const started = await start(dish, idempotencyKey || newKey(), until, signal);
      if ("failed" in started) {
        onProgress?.(started.failed);
        return started.failed;
      }
      onProgress?.(started.accepted);
      return follow(dish, started.accepted, started.location, until, onProgress, signal);
    },
  };
}
