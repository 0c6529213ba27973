// The client as a phone runs it: compiled as the mini-program devtools compile an ES module (to a CommonJS-like
// script), in a context holding only the ECMAScript built-ins, timers, `console` and `wx` — no URL,
// AbortController, DOMException, fetch or TextEncoder (the devtools' simulator has some of them; a device does
// not). `wx.request` behaves as WeChat documents it: `success` for any status (`statusCode` a string, as on
// some old Android builds), header names as the server cased them, `data` parsed JSON, `fail({errMsg})` only
// when no answer came (a timeout among them), `RequestTask.abort()`.
import http from "node:http";
import { readFileSync } from "node:fs";
import vm from "node:vm";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { body, exportedNames } from "../cjs.js";

const CLIENT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "index.js");

/** What a mini-program runtime has, and nothing else. @param {object} wx */
export function miniProgramContext(wx) {
  return vm.createContext({ setTimeout, clearTimeout, setInterval, clearInterval, console, wx });
}

/** `source` (an ES module) as a script whose value is its exports, as the devtools' ES6-to-ES5 step makes it. */
export function compiled(source) {
  return `(function () {\n${body(source)}\nreturn { ${exportedNames(source).join(", ")} };\n})()`;
}

/** The client loaded in `context`. */
export function loadClient(context, file = CLIENT) {
  return vm.runInContext(compiled(readFileSync(file, "utf8")), context, { filename: "miniprogram_npm/chuixiang/index.js" });
}

/**
 * A `wx` whose `request` does real HTTP as WeChat documents it. `hooks.before(options)` may return "drop" to
 * send the request and lose its answer (the server did the work; `fail` is called).
 * @param {{before?: (options: any) => string | undefined}} [hooks]
 */
export function wxStub(hooks = {}) {
  const requests = [];
  const storage = new Map();
  let logins = 0;
  return {
    requests,
    storage,
    /** wx.login: a fresh one-time code each time (`hooks.login` may answer `fail` instead). */
    login({ success, fail }) {
      logins += 1;
      setTimeout(() => (hooks.login?.() === "fail" ? fail?.({ errMsg: "login:fail" }) : success?.({ code: `code-${logins}` })), 1);
    },
    getStorageSync: (key) => (storage.has(key) ? storage.get(key) : ""),
    setStorageSync: (key, value) => void storage.set(key, value),
    removeStorageSync: (key) => void storage.delete(key),
    request(options) {
      const { url, method = "GET", header = {}, data, timeout = 60_000, success, fail } = options;
      const plan = hooks.before?.(options);
      const record = { url, method, header, at: Date.now() };
      requests.push(record);
      let settled = false;
      const once = (fn, value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        fn?.(value);
      };
      const req = http.request(url, { method, headers: header }, (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          if (plan === "drop") return once(fail, { errMsg: "request:fail net::ERR_CONNECTION_RESET" });
          const text = Buffer.concat(chunks).toString("utf8");
          let body = text;
          try {
            body = text ? JSON.parse(text) : "";
          } catch {
            /* dataType json: an unparsable body is passed as text */
          }
          const cased = {};
          for (let i = 0; i < res.rawHeaders.length; i += 2) cased[res.rawHeaders[i]] = res.rawHeaders[i + 1];
          record.status = res.statusCode;
          once(success, { statusCode: String(res.statusCode), header: cased, data: body, errMsg: "request:ok" });
        });
      });
      req.on("error", (e) => once(fail, { errMsg: `request:fail ${e.message}` }));
      const timer = setTimeout(() => {
        req.destroy();
        once(fail, { errMsg: "request:fail timeout" });
      }, timeout);
      if (data !== undefined) req.write(typeof data === "string" ? data : JSON.stringify(data));
      req.end();
      return {
        abort() {
          req.destroy();
          once(fail, { errMsg: "request:fail abort" });
        },
      };
    },
  };
}
