// The demo page: cook a dish with the client and show what docs/api.md's "what a mini-program shows" table says:
// the wait and why (queued with its countdown, offline, waiting for the model), the bar and ETA, the recipe as it
// fills in, the picture or its placeholder, the error with a retry for a retryable code, a cancel. No framework.
import { AbortedError, cancellable, createClient } from "./client.js";
import { API_BASE } from "./config.js";

const client = createClient({ baseUrl: API_BASE });
const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
const picture = () => /** @type {HTMLImageElement} */ ($("picture"));

/** The job under way: its dish, its id once known, how to cancel it, what was last announced. */
let job = { dish: "", jobId: "", cancel: () => {}, announced: "", pictureRetries: 0 };

// --- what a screen reader hears ---------------------------------------------------------------------------

/** Say `text` once (a live region repeats nothing it already holds). @param {string} text */
function announce(text) {
  if (!text || job.announced === text) return;
  job.announced = text;
  $("announce").textContent = text;
}

// --- the wait: onStatus --------------------------------------------------------------------------------------

const WAITS = {
  submitting: () => "正在提交…",
  queued: (/** @type {number} */ s) => `现在做菜的人多，排队中，${s} 秒后自动再试`,
  offline: (/** @type {number} */ s) => `网络不通，${s} 秒后自动重试`,
};
/** @type {ReturnType<typeof setInterval> | undefined} */
let countdown;

/** The client's state: a line for the waits a user must be told about, with its countdown to `retryAt`.
 * @param {{state: string, retryAt?: number}} status */
function onStatus(status) {
  clearInterval(countdown);
  const text = /** @type {Record<string, (s: number) => string>} */ (WAITS)[status.state];
  $("wait").hidden = !text;
  if (!text) return;
  $("status").hidden = false;
  const tick = () => {
    const seconds = Math.max(0, Math.ceil(((status.retryAt ?? Date.now()) - Date.now()) / 1000));
    $("wait").textContent = text(seconds);
  };
  tick();
  if (status.retryAt) countdown = setInterval(tick, 1000);
  $("wait").dataset.state = status.state;
  announce(status.state === "queued" ? "排队中" : status.state === "offline" ? "网络不通，稍后自动重试" : "");
}

// --- the document: onProgress ---------------------------------------------------------------------------------

/** @param {string} id @param {string[]} items */
function list(id, items) {
  const target = $(id);
  target.replaceChildren(
    ...items.map((text) => Object.assign(document.createElement("li"), { textContent: text, dir: "auto" })),
  );
  const title = document.getElementById(`${id}-title`);
  if (title) title.hidden = items.length === 0;
}

/** The ingredients of a recipe or a partial one: `{main: [{name, amount}], …}` or a list. @param {any} ingredients */
function ingredientLines(ingredients) {
  if (!ingredients) return [];
  const groups = Array.isArray(ingredients) ? [ingredients] : Object.values(ingredients);
  return groups.flat().map((i) => (typeof i === "string" ? i : `${i.name} ${i.amount ?? ""}`.trim()));
}

/** A section's name as the user reads it (`outline`, `steps:3-4`, `extras`, `imagePrompt`). @param {string} name */
function sectionLabel(name) {
  const [kind, range] = name.split(":");
  return { outline: "大纲", steps: `步骤 ${range ?? ""}`.trim(), extras: "搭配与小贴士", imagePrompt: "成品图描述" }[kind] ?? name;
}

/** A recipe written in sections: each section and its state (waiting, writing, done, dropped), until the recipe.
 * @param {Record<string, string> | undefined} sections @param {boolean} done */
function showSections(sections, done) {
  const target = $("sections");
  target.hidden = !sections || done;
  if (!sections || done) return;
  target.replaceChildren(...Object.entries(sections).map(([name, state]) => {
    const item = Object.assign(document.createElement("li"), { textContent: sectionLabel(name) });
    item.dataset.section = name;
    item.dataset.state = state;
    return item;
  }));
}

/** The bar, the phase and the ETA. @param {import("./client.js").JobDocument} doc */
function showProgress(doc) {
  const percent = doc.status === "SUCCEEDED" ? 100 : (doc.progress?.percent ?? (doc.status === "RUNNING" ? 5 : 0));
  $("bar").style.width = `${percent}%`;
  $("progress").setAttribute("aria-valuenow", String(percent));
  $("phase").textContent =
    doc.status === "SUCCEEDED" ? "做好了" :
    doc.status === "FAILED" ? "" :
    doc.stage === "image" ? "菜谱写好了，正在画成品图…" :
    doc.progress ? `正在写菜谱… ${percent}%` : "正在思考…";
  const eta = doc.status === "RUNNING" && doc.stage === "recipe" ? doc.progress?.etaMs : null;
  $("eta").textContent = eta ? `约 ${Math.max(1, Math.round(eta / 1000))} 秒` : "";
  announce(
    doc.status === "SUCCEEDED" ? `做好了：${doc.recipe?.name ?? doc.dish ?? ""}` :
    doc.stage === "image" ? "菜谱写好了，正在画成品图" :
    doc.progress ? "开始写菜谱" : "",
  );
}

/** Pairings and nutrition: hidden when the recipe was served without them (`degraded` names `extras`).
 * @param {any} recipe @param {string[] | null | undefined} degraded */
function showExtras(recipe, degraded) {
  const hide = !recipe?.pairings || !recipe?.nutrition || Boolean(degraded?.includes("extras"));
  $("extras").hidden = hide;
  if (hide) return;
  const names = { side: "配菜", soup: "汤品", staple: "主食", drink: "饮品" };
  list("pairings", Object.entries(recipe.pairings).filter(([, v]) => v).map(([k, v]) => `${names[/** @type {keyof typeof names} */ (k)] ?? k}：${v}`));
  const n = recipe.nutrition;
  list("nutrition", [`热量 ${n.caloriesKcal} 千卡`, `蛋白质 ${n.proteinG} 克`, `脂肪 ${n.fatG} 克`, `碳水 ${n.carbsG} 克`]);
}

/** The picture, or its placeholder while it is drawn or when it could not be. @param {import("./client.js").JobDocument} doc */
function showPicture(doc, name = "") {
  const img = picture();
  const url = doc.image?.url;
  const placeholder = $("placeholder");
  if (url && img.dataset.url !== url) {
    img.dataset.url = url;
    img.src = url;
  }
  img.alt = name;
  img.hidden = !url;
  placeholder.hidden = Boolean(url);
  placeholder.textContent = doc.imageError ? "成品图没画出来" : "成品图正在画…";
  placeholder.dataset.state = doc.imageError ? "failed" : "drawing";
}

/** What the page shows for one polled document. @param {import("./client.js").JobDocument} doc */
function show(doc) {
  job.jobId = doc.jobId || job.jobId;
  $("status").hidden = false;
  showProgress(doc);
  showSections(doc.progress?.sections, Boolean(doc.recipe));
  const recipe = doc.recipe ?? doc.partial;
  if (recipe) {
    $("recipe").hidden = false;
    $("recipe").dataset.source = doc.recipe ? "recipe" : "partial";
    $("name").textContent = recipe.name ?? "";
    $("summary").textContent = recipe.summary ?? "";
    list("ingredients", ingredientLines(recipe.ingredients));
    // In sections the outline comes first: its step titles stand for the steps until each is written.
    list("steps", (recipe.steps ?? recipe.stepTitles ?? []).map((/** @type {any} */ s) => s.text ?? String(s)));
    showExtras(doc.recipe, doc.degraded);
    showPicture(doc, recipe.name ?? "");
  }
  if (doc.status === "FAILED" && doc.error) fail(doc.error.message, doc.error.code, Boolean(doc.error.retryable));
}

// --- the picture's link: presigned, it may expire; poll the job again for a new one ------------------------

picture().addEventListener("error", async () => {
  if (!job.jobId || job.pictureRetries >= 2) return;
  job.pictureRetries += 1;
  const doc = await client.getJob(job.jobId).catch(() => null);
  const url = doc?.image?.url;
  if (!url) return;
  const img = picture();
  img.removeAttribute("src"); // the same URL again: the browser loads it only once src has changed
  img.src = url;
});

// --- the form -------------------------------------------------------------------------------------------------

/** @param {string} message @param {string} code @param {boolean} retryable */
function fail(message, code, retryable) {
  $("error").textContent = message;
  $("error").dataset.code = code;
  $("failure").hidden = false;
  $("retry").hidden = !retryable;
}

/** @param {string} state */
function settle(state) {
  clearInterval(countdown);
  $("wait").hidden = true;
  $("cancel").hidden = true;
  /** @type {HTMLButtonElement} */ ($("go")).disabled = false;
  document.body.dataset.state = state;
}

/** @param {string} dish */
async function start(dish) {
  const cancel = cancellable();
  job = { dish, jobId: "", cancel: () => cancel.cancel(), announced: "", pictureRetries: 0 };
  /** @type {HTMLButtonElement} */ ($("go")).disabled = true;
  $("failure").hidden = true;
  $("recipe").hidden = true;
  $("cancel").hidden = false;
  picture().hidden = true;
  delete picture().dataset.url;
  document.body.dataset.state = "cooking";
  try {
    const done = await client.cook(dish, { onProgress: show, onStatus, signal: cancel.signal });
    show(done);
    settle(done.status.toLowerCase());
  } catch (error) {
    const cancelled = error instanceof AbortedError;
    if (cancelled) {
      $("phase").textContent = "已取消";
      announce("已取消");
    } else {
      fail(/** @type {Error} */ (error).message, "NETWORK", true);
    }
    settle(cancelled ? "cancelled" : "failed");
  }
}

$("cook").addEventListener("submit", (event) => {
  event.preventDefault();
  void start(/** @type {HTMLInputElement} */ ($("dish")).value.trim());
});
$("retry").addEventListener("click", () => void start(job.dish));
$("cancel").addEventListener("click", () => job.cancel());
