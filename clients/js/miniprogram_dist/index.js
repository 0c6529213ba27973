// Generated from clients/js/index.js by `node clients/js/cjs.js`: do not edit.
// The Chuixiang API client: POST a dish, then poll its job to the end, following every rule of docs/api.md.
// An ES module with no dependencies; JSDoc types (checked by `tsc --checkJs` if you have it, not required).
// It runs where a mini-program runs: ECMAScript built-ins, timers and `wx` only (no URL, AbortController,
// DOMException, fetch or TextEncoder there; the devtools' simulator has some of them, a phone does not).
//
//   import { createClient } from "./index.js";
//   const client = createClient({ baseUrl: "https://api.example.cn", getToken: () => session.token });
//   const job = await client.cook("番茄炒蛋", { onProgress: (doc) => render(doc), onStatus: (s) => show(s) });
//   job.status === "SUCCEEDED" ? show(job.recipe, job.image) : showError(job.error.message);

/**
 * @typedef {{code: string, message: string, reason?: string, retryable?: boolean}} ApiError
 * @typedef {{jobId: string, dish?: string, status: "PENDING"|"RUNNING"|"SUCCEEDED"|"FAILED", pollAfterMs: number|null,
 *   deadlineAt: string, stage?: string, recipe?: object|null, image?: {url: string, key: string}|null,
 *   imageError?: ApiError|null, error?: ApiError|null, progress?: object|null, partial?: object|null,
 *   degraded?: string[]|null}} JobDocument
 * @typedef {{aborted: boolean, reason?: unknown, addEventListener: (type: "abort", listener: () => void,
 *   options?: {once?: boolean}) => void, removeEventListener: (type: "abort", listener: () => void) => void}} Signal
 *   An AbortSignal, or the one `cancellable()` makes where there is no AbortController (a mini-program).
 * @typedef {{method: "GET"|"POST", url: string, headers: Record<string, string>, body?: string,
 *   signal?: Signal, timeoutMs?: number}} Request
 * @typedef {{state: "submitting"|"queued"|"waiting"|"writing"|"drawing"|"offline"|"done", retryAt?: number}} Status
 *   What the client is doing, for the page: `queued` (429) and `offline` (no answer) say when it tries again.
 * @typedef {{status: number, headers: Record<string, string>, body: any}} Response
 *   `headers` with lower-case names; `body` the parsed JSON (null when there is none).
 * @typedef {(request: Request) => Promise<Response>} RequestFn
 *   Rejects only when no answer came (the network); any HTTP status resolves.
 */

/** How long a client keeps at a job before it gives up (ClientGiveUpSeconds: above the job's own deadline). */
const GIVE_UP_MS = 360_000;
/** Waits after an unanswered request: 1 s, 2 s, 4 s… up to this. */
const MAX_BACKOFF_MS = 8_000;
/** A 429 or 503 without Retry-After: wait this long. */
const DEFAULT_RETRY_AFTER_MS = 5_000;
/** One request's limit (an answer that never comes must not hang `cook`): above the API's slowest answer, a
 * POST that starts a job (~1 s), and below the polls' pace rules (1.5-5 s) times a few. */
const REQUEST_TIMEOUT_MS = 10_000;

/** What the user reads when the API cannot be reached (the API's own codes carry the API's message). */
const UNREACHABLE = Object.freeze({
  code: "API_UNREACHABLE",
  message: "网络不太好，暂时连不上服务器，请稍后再试。",
});

/** `getToken` rejected (the sign-in failed): the job ends UNAUTHORIZED, never retried as a network error. */
class TokenRefusedError extends Error {
  /** @param {unknown} cause */
  constructor(cause) {
    super(`getToken failed: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = "TokenRefusedError";
  }
}

/** The API could not be reached for longer than the job may take: `cook` rejects with this. */
class ApiUnreachableError extends Error {
  /** @param {unknown} cause */
  constructor(cause) {
    super(UNREACHABLE.message, { cause });
    this.name = "ApiUnreachableError";
    this.code = UNREACHABLE.code;
  }
}

/** What `cook` rejects with when its signal aborts (a DOMException where there is one is not needed). */
class AbortedError extends Error {
  constructor(message = "cook was aborted") {
    super(message);
    this.name = "AbortError";
  }
}

/** @param {Signal | undefined} signal */
function abortError(signal) {
  return signal?.reason instanceof Error ? signal.reason : new AbortedError();
}

/**
 * A signal and its `cancel`, with no AbortController: `const c = cancellable(); cook(dish, {signal: c.signal});
 * c.cancel();`. (Where AbortController exists, its signal works as well.)
 * @returns {{signal: Signal, cancel: (reason?: unknown) => void}}
 */
function cancellable() {
  /** @type {Set<() => void>} */
  const listeners = new Set();
  /** @type {Signal} */
  const signal = {
    aborted: false,
    reason: undefined,
    addEventListener: (_type, listener) => listeners.add(listener),
    removeEventListener: (_type, listener) => listeners.delete(listener),
  };
  return {
    signal,
    cancel(reason = new AbortedError()) {
      if (signal.aborted) return;
      signal.aborted = true;
      signal.reason = reason;
      for (const listener of [...listeners]) listener();
      listeners.clear();
    },
  };
}

/**
 * Wait `ms`, or reject at once when `signal` aborts.
 * @param {number} ms @param {Signal} [signal] @returns {Promise<void>}
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

/** A wait with jitter (a half to the whole of `ms`): many clients told the same thing do not come back at once. */
function jittered(ms) {
  return ms / 2 + Math.random() * (ms / 2);
}

/**
 * `ref` against the API's base URL (ending in "/"), without `URL`: an absolute URL as it is; a path — the API's
 * `Location` is one, `/recipes/{id}` — under the base's own path, so an API behind a prefix (`/api`, a custom
 * domain's mapping) keeps it.
 * @param {string} base @param {string} ref
 */
function resolveUrl(base, ref) {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(ref)) return ref;
  return base + ref.replace(/^\/+/, "");
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

/** The request seam of a browser or Node: `fetch`, bounded by `timeoutMs`. @type {RequestFn} */
async function fetchRequest({ method, url, headers, body, signal, timeoutMs = REQUEST_TIMEOUT_MS }) {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs);
  try {
    const answer = await fetch(url, { method, headers, body, signal: controller.signal });
    const text = await answer.text();
    /** @type {Record<string, string>} */
    const named = {};
    answer.headers.forEach((value, name) => {
      named[name.toLowerCase()] = value;
    });
    return { status: answer.status, headers: named, body: text ? JSON.parse(text) : null };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * The request seam for a WeChat mini-program: `createClient({baseUrl, request: wxRequest(wx)})` (the default
 * where there is a global `wx`). As WeChat documents wx.request: `success` for any status (`statusCode` a
 * string on some old Android builds), header names in the server's casing, `data` parsed JSON; `fail` only when
 * no answer came (a timeout among them); `RequestTask.abort()` cancels it.
 * @param {{request: (options: object) => {abort: () => void}}} wx @returns {RequestFn}
 */
function wxRequest(wx) {
  return ({ method, url, headers, body, signal, timeoutMs = REQUEST_TIMEOUT_MS }) =>
    new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(abortError(signal));
      const onAbort = () => task.abort();
      const task = wx.request({
        url,
        method,
        header: headers,
        data: body,
        dataType: "json",
        timeout: timeoutMs,
        success: (/** @type {any} */ r) => {
          signal?.removeEventListener("abort", onAbort);
          /** @type {Record<string, string>} */
          const named = {};
          for (const [name, value] of Object.entries(r.header || {})) named[name.toLowerCase()] = String(value);
          resolve({ status: Number(r.statusCode), headers: named, body: r.data === "" ? null : r.data });
        },
        fail: (/** @type {any} */ e) => {
          signal?.removeEventListener("abort", onAbort);
          reject(signal?.aborted ? abortError(signal) : new Error(e?.errMsg || "wx.request failed"));
        },
      });
      signal?.addEventListener("abort", onAbort, { once: true });
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
 * @param {string} dish @param {any} body @param {string} [jobId] @param {boolean} [retryable]
 * @returns {JobDocument}
 */
function refused(dish, body, jobId = "", retryable = false) {
  const error = body?.error ?? { code: "BAD_REQUEST", message: "请求有误。" };
  return { jobId, dish, status: "FAILED", pollAfterMs: null, deadlineAt: "", error: { ...error, retryable } };
}

/** A 429 whose Retry-After runs past the client's give-up time: the API's own error, or this. */
const TOO_MANY = { error: { code: "TOO_MANY_JOBS", message: "现在做菜的人太多了，请稍后再试。" } };
/** @param {any} body */
function tooMany(body) {
  return body?.error?.code === "TOO_MANY_JOBS" ? body : TOO_MANY;
}

/** The end of a job the page is told of: its document, and the state `done`.
 * @param {JobDocument} doc @param {(doc: JobDocument) => void} progress @param {(s: Status) => void} status */
function ended(doc, progress, status) {
  progress(doc);
  status({ state: "done" });
  return doc;
}

/** A 401 the token could not fix: retryable once a new token is had (signing in again). */
const UNAUTHORIZED = { error: { code: "UNAUTHORIZED", message: "登录已过期，请重新登录后再试。" } };
/** 401s in a row before the client stops asking for a fresh token (one refresh, then the user must sign in). */
const UNAUTHORIZED_TRIES = 2;

/** What the page shows while a job runs, from its document. @param {JobDocument} doc @returns {Status["state"]} */
function stateOf(doc) {
  if (doc.status === "SUCCEEDED" || doc.status === "FAILED") return "done";
  if (doc.stage === "image") return "drawing";
  return doc.progress ? "writing" : "waiting";
}

/**
 * @param {{baseUrl: string,
 *   getToken?: (options: {forceRefresh: boolean}) => string | null | undefined | Promise<string | null | undefined>,
 *   token?: string | (() => string | Promise<string>), request?: RequestFn, timeoutMs?: number,
 *   giveUpMs?: number}} options
 *   `getToken`: asked before every request, so a refreshed token is used, with `forceRefresh: true` once after
 *   the API refused its token (401): the one it holds was refused, sign in again (`token`: the older name).
 *   `request`: the transport (default: `wx.request` where there is a `wx`, else `fetch`). `timeoutMs`: one
 *   request's limit. `giveUpMs`: the whole `cook`, stuck requests included (default ClientGiveUpSeconds).
 */
function createClient({
  baseUrl,
  getToken,
  token,
  request,
  timeoutMs = REQUEST_TIMEOUT_MS,
  giveUpMs = GIVE_UP_MS,
}) {
  const base = baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`;
  const wx = /** @type {any} */ (globalThis).wx;
  const transport = request ?? (wx?.request ? wxRequest(wx) : fetchRequest);
  /** @param {boolean} forceRefresh */
  const tokenOf = (forceRefresh) =>
    getToken ? getToken({ forceRefresh }) : typeof token === "function" ? token() : token;

  /**
   * @param {Partial<Request>} req @param {number} until @param {boolean} [forceRefresh] the API refused the
   *   last token: ask for a new one @returns {Promise<Response>}
   */
  async function send(req, until, forceRefresh = false) {
    /** @type {Record<string, string>} */
    const headers = { accept: "application/json", ...(req.headers || {}) };
    let bearer;
    try {
      bearer = await tokenOf(forceRefresh);
    } catch (error) {
      throw new TokenRefusedError(error);
    }
    if (bearer) headers.authorization = `Bearer ${bearer}`;
    const left = Math.max(1, Math.min(timeoutMs, until - Date.now()));
    return transport(/** @type {Request} */ ({ ...req, headers, timeoutMs: left }));
  }

  /**
   * Send until answered: an unanswered request (no answer, or none within `timeoutMs`) is sent again after
   * 1, 2, 4… s with jitter, until `until` (ms since the epoch) has passed; then ApiUnreachableError. Each
   * answer goes to `handle`, which returns a result to stop with, or a wait in ms before sending again.
   * @template T
   * @param {(until: number) => Promise<Response>} once @param {(r: Response) => {done: T} | {waitMs: number,
   *   state?: Status["state"]}} handle @param {number} until @param {(s: Status) => void} status
   * @param {Signal} [signal] @returns {Promise<T>}
   */
  async function persist(once, handle, until, status, signal) {
    let backoff = 1000;
    for (;;) {
      if (signal?.aborted) throw abortError(signal);
      if (Date.now() >= until) throw new ApiUnreachableError(new Error("gave up: giveUpMs has passed"));
      let answer;
      try {
        answer = await once(until);
      } catch (error) {
        if (signal?.aborted) throw abortError(signal);
        if (error instanceof TokenRefusedError) throw error;
        const wait = jittered(backoff);
        if (Date.now() + wait > until) throw new ApiUnreachableError(error);
        status({ state: "offline", retryAt: Date.now() + wait });
        await sleep(wait, signal);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
        continue;
      }
      backoff = 1000;
      const next = handle(answer);
      if ("done" in next) return next.done;
      if (next.state) status({ state: next.state, retryAt: Date.now() + next.waitMs });
      await sleep(next.waitMs, signal);
    }
  }

  /**
   * Start the dish's job (or join the one generating it): one Idempotency-Key for every try, so a retry after
   * a lost answer is the same job. 429 and 503 wait out Retry-After, keeping the caller's place in line.
   * @param {string} dish @param {string} key @param {number} until @param {(s: Status) => void} status
   * @param {Signal} [signal] @returns {Promise<{accepted: JobDocument, location: string} | {failed: JobDocument}>}
   */
  function start(dish, key, until, status, signal) {
    const body = JSON.stringify({ dish });
    let unauthorized = 0;
    let refresh = false;
    const post = (/** @type {number} */ limit) => {
      const sent = send(
        {
          method: "POST",
          url: resolveUrl(base, "recipes"),
          headers: { "content-type": "application/json", "idempotency-key": key },
          body,
          signal,
        },
        limit,
        refresh,
      );
      refresh = false;
      return sent;
    };
    status({ state: "submitting" });
    return persist(
      post,
      (r) => {
        if (r.status === 202) {
          // Location is the API's path (`/recipes/{id}`): under the base, whatever prefix the base has.
          const location = resolveUrl(base, r.headers.location || `recipes/${r.body.jobId}`);
          return { done: { accepted: r.body, location } };
        }
        if (r.status === 401 && ++unauthorized < UNAUTHORIZED_TRIES) {
          refresh = true; // the token was refused: a fresh one, not the one the app keeps
          return { waitMs: 0 };
        }
        if (r.status === 401) return { done: { failed: refused(dish, UNAUTHORIZED, "", true) } };
        if (r.status === 429) {
          const waitMs = retryAfterMs(r.headers["retry-after"]);
          // Come back after the client gives up? Say so now, not after sleeping it out.
          if (Date.now() + waitMs > until) return { done: { failed: refused(dish, tooMany(r.body), "", true) } };
          return { waitMs, state: "queued" };
        }
        if (r.status === 503) return { waitMs: retryAfterMs(r.headers["retry-after"]), state: "offline" };
        if (r.status === 409) return { waitMs: 1000 }; // the same key's first request is still being answered
        if (r.status >= 500) return { waitMs: jittered(DEFAULT_RETRY_AFTER_MS), state: "offline" };
        return { done: { failed: refused(dish, r.body) } };
      },
      until,
      status,
      signal,
    );
  }

  /**
   * Poll the job every `pollAfterMs` until it is terminal; every document to `onProgress` (one that throws
   * is the page's problem: the job goes on). Past its `deadlineAt` one more poll (the API fails a job it finds
   * late), and no more. A 401 mid-poll asks for a fresh token and polls on: the job outlives its token.
   * @param {string} dish @param {JobDocument} accepted @param {string} location @param {number} until
   * @param {(doc: JobDocument) => void} progress @param {(s: Status) => void} status @param {Signal} [signal]
   * @returns {Promise<JobDocument>}
   */
  async function follow(dish, accepted, location, until, progress, status, signal) {
    const deadline = Date.parse(accepted.deadlineAt) || until;
    let doc = accepted;
    let waitMs = accepted.pollAfterMs ?? 3000;
    let unauthorized = 0;
    let refresh = false;
    for (;;) {
      status({ state: stateOf(doc), retryAt: Date.now() + waitMs });
      await sleep(Math.min(waitMs, Math.max(0, deadline - Date.now()) + 1000), signal);
      const late = Date.now() > deadline;
      doc = await persist(
        (limit) => {
          const sent = send({ method: "GET", url: location, signal }, limit, refresh);
          refresh = false;
          return sent;
        },
        (r) => {
          if (r.status === 200) return { done: /** @type {JobDocument} */ (r.body) };
          if (r.status === 401 && ++unauthorized <= UNAUTHORIZED_TRIES) {
            refresh = true;
            return { waitMs: jittered(2000) };
          }
          if (r.status === 401) return { done: refused(dish, UNAUTHORIZED, accepted.jobId, true) };
          if (r.status === 429 || r.status >= 500)
            return { waitMs: retryAfterMs(r.headers["retry-after"]), state: "offline" };
          return { done: refused(dish, r.body, accepted.jobId) };
        },
        Math.min(until, deadline + 60_000),
        status,
        signal,
      );
      if (doc.status !== "FAILED" || doc.error?.code !== "UNAUTHORIZED") unauthorized = 0;
      progress(doc);
      if (doc.status === "SUCCEEDED" || doc.status === "FAILED" || doc.pollAfterMs === null) break;
      if (late) {
        const error = { code: "JOB_TIMED_OUT", message: "这道菜做得太久，已经停下了，再试一次。", retryable: true };
        doc = { ...doc, status: "FAILED", pollAfterMs: null, error };
        break;
      }
      waitMs = doc.pollAfterMs;
    }
    status({ state: "done" });
    return doc;
  }

  /** The page's callbacks, so that one that throws does not abandon the job. */
  function guarded(/** @type {((x: any) => void) | undefined} */ callback) {
    return (/** @type {any} */ value) => {
      try {
        callback?.(value);
      } catch (error) {
        console.error("chuixiang client: a callback threw; the job goes on", error);
      }
    };
  }

  /** @param {string} jobId */
  function locationOf(jobId) {
    return resolveUrl(base, `recipes/${encodeURIComponent(jobId)}`);
  }

  /**
   * Cook `dish`: resolves to the final job document, SUCCEEDED or FAILED (with `error.code` and the
   * Chinese `error.message`; a refused request is a FAILED document too). Rejects only when `signal`
   * aborts, or with ApiUnreachableError when the API stays unreachable until `giveUpMs` has passed.
   * @param {string} dish
   * @param {{onProgress?: (doc: JobDocument) => void, onStatus?: (s: Status) => void, signal?: Signal,
   *   idempotencyKey?: string}} [options]
   * @returns {Promise<JobDocument>}
   */
  async function cook(dish, { onProgress, onStatus, signal, idempotencyKey } = {}) {
    const until = Date.now() + giveUpMs;
    const progress = guarded(onProgress);
    const status = guarded(onStatus);
    let jobId = "";
    try {
      const started = await start(dish, idempotencyKey || newKey(), until, status, signal);
      if ("failed" in started) return ended(started.failed, progress, status);
      jobId = started.accepted.jobId;
      progress(started.accepted);
      return await follow(dish, started.accepted, started.location, until, progress, status, signal);
    } catch (error) {
      if (error instanceof TokenRefusedError) return ended(refused(dish, UNAUTHORIZED, jobId, true), progress, status);
      throw error;
    }
  }

  /**
   * One poll of a job: its document now (a FAILED document for one the API does not know).
   * @param {string} jobId @param {{signal?: Signal}} [options] @returns {Promise<JobDocument>}
   */
  async function getJob(jobId, { signal } = {}) {
    const until = Date.now() + timeoutMs * 3;
    let refresh = false;
    let unauthorized = 0;
    try {
      return await persist(
        (limit) => {
          const sent = send({ method: "GET", url: locationOf(jobId), signal }, limit, refresh);
          refresh = false;
          return sent;
        },
        (r) => {
          if (r.status === 200) return { done: /** @type {JobDocument} */ (r.body) };
          if (r.status === 401 && ++unauthorized < UNAUTHORIZED_TRIES) {
            refresh = true;
            return { waitMs: 0 };
          }
          if (r.status >= 500 || r.status === 429) return { waitMs: retryAfterMs(r.headers["retry-after"]) };
          return { done: refused("", r.status === 401 ? UNAUTHORIZED : r.body, jobId, r.status === 401) };
        },
        until,
        () => {},
        signal,
      );
    } catch (error) {
      if (error instanceof TokenRefusedError) return refused("", UNAUTHORIZED, jobId, true);
      throw error;
    }
  }

  /**
   * Pick up a job started earlier (a reloaded page keeps its `jobId`) and follow it to the end, as `cook`.
   * @param {string} jobId
   * @param {{onProgress?: (doc: JobDocument) => void, onStatus?: (s: Status) => void, signal?: Signal}} [options]
   * @returns {Promise<JobDocument>}
   */
  async function resume(jobId, { onProgress, onStatus, signal } = {}) {
    const until = Date.now() + giveUpMs;
    const progress = guarded(onProgress);
    const status = guarded(onStatus);
    const doc = await getJob(jobId, { signal });
    if (doc.status === "SUCCEEDED" || doc.status === "FAILED") return ended(doc, progress, status);
    progress(doc);
    try {
      return await follow(doc.dish ?? "", doc, locationOf(jobId), until, progress, status, signal);
    } catch (error) {
      if (error instanceof TokenRefusedError) {
        return ended(refused(doc.dish ?? "", UNAUTHORIZED, jobId, true), progress, status);
      }
      throw error;
    }
  }

  // Plain functions, not methods: `const { cook, resume } = client` works as React and Vue code writes it.
  return { cook, getJob, resume };
}

module.exports = { GIVE_UP_MS, REQUEST_TIMEOUT_MS, UNREACHABLE, ApiUnreachableError, AbortedError, cancellable, resolveUrl, fetchRequest, wxRequest, createClient };
