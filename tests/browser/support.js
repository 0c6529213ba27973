// What the browser tier shares: Debian's chromium through playwright-core, a stand-in model that fails for some
// dishes, a recording proxy, and a page on an origin the API does not allow.
import http from "node:http";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { spawn } from "node:child_process";
import path from "node:path";
import { chromium } from "playwright-core";

import { ROOT, freePort } from "../../clients/js/test/serve.js";

/**
 * Debian's chromium, as this machine runs it: its connections to Google's hosts are refused here. Without the
 * address bar's two WebUI popups: headless, every page's window still rendered them in a renderer of their own
 * (chrome://omnibox-popup.top-chrome, ~0.6 s of CPU a page), browser UI no page under test shows.
 */
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync",
      `--disable-features=${[...playwrightDisabledFeatures(), "WebUIOmniboxPopup", "WebUIOmniboxAimPopup"].join(",")}`],
  });
}

/**
 * The features playwright-core disables itself (HttpsUpgrades, Translate, PaintHolding...), which ours are added to:
 * Chromium takes the last `--disable-features` only, so a second one of ours would turn all of them back on. Read
 * from its bundle, as its `chromiumSwitches` declares them; a version that declares them otherwise fails here.
 * @returns {string[]}
 */
export function playwrightDisabledFeatures() {
  const bundle = readFileSync(createRequire(import.meta.url).resolve("playwright-core/lib/coreBundle"), "utf8");
  const list = bundle.match(/disabledFeatures = \[([^\]]*)\]/);
  const names = list ? [...list[1].replace(/\/\/.*$/gm, "").matchAll(/"(\w+)"/g)].map((m) => m[1]) : [];
  if (!names.includes("HttpsUpgrades")) {
    throw new Error("playwright-core's own disabled features not found in lib/coreBundle: see how this version passes them");
  }
  return names;
}

/** @param {http.Server} server @returns {Promise<number>} */
async function listen(server) {
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  return /** @type {import("node:net").AddressInfo} */ (server.address()).port;
}

/**
 * The project's fake model in its own process, behind a proxy that answers 500 to a recipe request for a dish
 * with 失败 in its name (a model failing for real, over HTTP, as the recipe stage meets one). `paceMs` per chunk:
 * the partial recipe must be on screen for several of the page's polls, however late a poll is on a busy machine.
 * At the template's progress interval (polls every 1.5 s while written in sections) that took 150 ms: an outline
 * written at 60 ms in ~3 s was about two polls, and a slow GET on a loaded CI machine missed it (a flake). The
 * tests' stacks poll eight times as often (`TEST_PROGRESS_INTERVAL_MS`): at 50 ms the outline takes ~2.5 s,
 * about thirteen polls of ~190 ms, and a whole job a third of the time it took at 150 ms.
 */
export async function failingModel(paceMs = 50) {
  const port = await freePort();
  const fake = spawn(path.join(ROOT, ".venv", "bin", "python"),
    ["-m", "chuixiang_local.model.fake_model", "--port", String(port), "--pace-ms", String(paceMs)],
    { cwd: ROOT, stdio: ["pipe", "ignore", "ignore"] }); // stdin open: it exits with its parent (EOF)
  for (let i = 0; i < 100; i++) {
    try { await fetch(`http://127.0.0.1:${port}/v1/models`); break; } catch { await new Promise((r) => setTimeout(r, 100)); }
  }
  const proxy = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    if (req.url?.includes("/chat/completions") && body.toString().includes("失败")) {
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "upstream overloaded", type: "server_error" } }));
      return;
    }
    const upstream = http.request(
      { host: "127.0.0.1", port, path: req.url, method: req.method, headers: req.headers },
      (answer) => { res.writeHead(answer.statusCode || 502, answer.headers); answer.pipe(res); },
    );
    upstream.on("error", (error) => { console.error("model proxy:", error.message); res.destroy(); });
    upstream.end(body);
  });
  const proxyPort = await listen(proxy);
  return {
    url: `http://127.0.0.1:${proxyPort}/v1`,
    stop() { proxy.closeAllConnections(); proxy.close(); fake.kill(); },
  };
}

/** A proxy to `target` that records each request's method, path, content type and the status answered. */
export async function recordingProxy(target) {
  /** @type {{method: string, path: string, contentType: string|undefined, status: number, acao: string|undefined}[]} */
  const seen = [];
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const forwarded = ["content-type", "origin", "accept", "access-control-request-method", "access-control-request-headers"];
    const headers = Object.fromEntries(forwarded.filter((h) => req.headers[h]).map((h) => [h, String(req.headers[h])]));
    const answer = await fetch(`${target}${req.url}`, {
      method: req.method,
      headers,
      body: ["GET", "HEAD", "OPTIONS"].includes(req.method || "") ? undefined : Buffer.concat(chunks),
    });
    const text = await answer.text();
    seen.push({ method: req.method || "", path: req.url || "", contentType: req.headers["content-type"],
      status: answer.status, acao: answer.headers.get("access-control-allow-origin") ?? undefined });
    const passed = ["content-type", "access-control-allow-origin", "access-control-allow-methods",
      "access-control-allow-headers", "access-control-expose-headers", "vary", "retry-after", "location"];
    res.writeHead(answer.status, Object.fromEntries(passed.filter((h) => answer.headers.get(h)).map((h) => [h, answer.headers.get(h)])));
    res.end(text);
  });
  const port = await listen(server);
  return { base: `http://127.0.0.1:${port}`, seen, stop() { server.closeAllConnections(); server.close(); } };
}

/** An empty page on an origin of its own (not in CorsAllowOrigins): where a hostile page runs its script. */
export async function foreignOrigin() {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>another site</title>");
  });
  const port = await listen(server);
  return { origin: `http://127.0.0.1:${port}`, stop() { server.closeAllConnections(); server.close(); } };
}
