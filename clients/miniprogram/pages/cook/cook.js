// One page: name a dish, follow its job with the client, show what docs/api.md's "what a mini-program shows"
// table says (the wait, progress and ETA, the partial recipe and step titles, the error with a retry button for
// retryable codes, the picture or its placeholder, the pairings and nutrition a degraded recipe hides).
const { createClient, cancellable } = require("../../lib/chuixiang.js");
const { loginTokens } = require("../../lib/login.js");

const WAITING = { submitting: "正在提交…", queued: "做菜的人有点多，正在排队…", waiting: "正在排队/思考…",
  writing: "正在写菜谱…", drawing: "菜谱写好了，正在画成品图…", offline: "网络不太好，正在重试…", done: "" };
const PAIRINGS = { side: "配菜", soup: "汤品", staple: "主食", drink: "饮品" };

/** The server's `etaMs`, less the time since it was measured (`updatedAt`): a document read 15 s after its
 * progress was written must not promise 19 s when 4 are left. */
function eta(progress, now) {
  if (!progress || !progress.etaMs) return "";
  const age = progress.updatedAt ? Math.max(0, now - Date.parse(progress.updatedAt)) : 0;
  return `约 ${Math.max(1, Math.round((progress.etaMs - age) / 1000))} 秒`;
}

/** The picture: its URL; else a placeholder while it is drawn ("drawing") or when it could not be ("failed"). */
function picture(doc) {
  if (doc.image && doc.image.url) return { imageUrl: doc.image.url, imagePlaceholder: "" };
  if (doc.imageError) return { imageUrl: "", imagePlaceholder: "成品图没画出来" };
  const drawing = doc.stage === "image" || (doc.status === "RUNNING" && Boolean(doc.recipe));
  return { imageUrl: "", imagePlaceholder: drawing ? "成品图正在画…" : "" };
}

/** Pairings and nutrition, shown only with a recipe served whole (`degraded` without `extras`). */
function extras(doc) {
  const recipe = doc.recipe;
  if (!recipe || !recipe.pairings || !recipe.nutrition || (doc.degraded || []).includes("extras")) {
    return { showExtras: false, pairings: [], nutrition: [] };
  }
  const n = recipe.nutrition;
  return {
    showExtras: true,
    pairings: Object.keys(PAIRINGS).filter((k) => recipe.pairings[k]).map((k) => `${PAIRINGS[k]}：${recipe.pairings[k]}`),
    nutrition: [`热量 ${n.caloriesKcal} 千卡`, `蛋白质 ${n.proteinG} 克`, `脂肪 ${n.fatG} 克`, `碳水 ${n.carbsG} 克`],
  };
}

/** What the page shows of one job document (pure: the page test checks it without a network). */
function view(doc, now = Date.now()) {
  const recipe = doc.recipe || doc.partial || null;
  const progress = doc.progress || null;
  return {
    percent: doc.status === "SUCCEEDED" ? 100 : progress ? progress.percent : 0,
    eta: doc.status === "RUNNING" && doc.stage !== "image" ? eta(progress, now) : "",
    name: recipe ? recipe.name || "" : "",
    summary: recipe ? recipe.summary || "" : "",
    ingredients: recipe ? ingredientLines(recipe.ingredients) : [],
    steps: recipe ? (recipe.steps || recipe.stepTitles || []).map((s) => (typeof s === "string" ? s : s.text)) : [],
    ...picture(doc),
    ...extras(doc),
    error: doc.status === "FAILED" && doc.error ? doc.error.message : "",
    retryable: doc.status === "FAILED" && Boolean(doc.error && doc.error.retryable),
  };
}

function ingredientLines(ingredients) {
  if (!ingredients) return [];
  const groups = Array.isArray(ingredients) ? [ingredients] : Object.values(ingredients);
  return [].concat(...groups).map((i) => (typeof i === "string" ? i : `${i.name} ${i.amount || ""}`.trim()));
}

Page({
  data: { dish: "", cooking: false, state: "", status: WAITING.done, ...view({ status: "PENDING" }) },

  onLoad() {
    const { apiBase, loginUrl } = getApp().globalData;
    this.client = createClient({ baseUrl: apiBase, ...(loginUrl ? { getToken: loginTokens(wx, loginUrl) } : {}) });
  },

  onUnload() {
    if (this.cancel) this.cancel.cancel();
  },

  onInput(event) {
    this.setData({ dish: event.detail.value });
  },

  onCook() {
    const dish = this.data.dish.trim();
    if (!dish || this.data.cooking) return Promise.resolve();
    this.cancel = cancellable();
    this.jobId = "";
    this.setData({ cooking: true, ...view({ status: "PENDING" }) });
    return this.client
      .cook(dish, {
        signal: this.cancel.signal,
        onProgress: (doc) => {
          this.jobId = doc.jobId || this.jobId;
          this.setData(view(doc));
        },
        onStatus: ({ state }) => this.setData({ state, status: WAITING[state] || "" }),
      })
      .then((doc) => this.setData({ cooking: false, ...view(doc) }))
      .catch((error) => {
        if (error.name === "AbortError") return this.setData({ cooking: false });
        this.setData({ cooking: false, error: error.message, retryable: true });
      });
  },

  onRetry() {
    return this.onCook();
  },

  /** The picture's presigned link expired (403): poll the job for a fresh one. */
  onImageError() {
    if (!this.jobId || this.imageRetried) return Promise.resolve();
    this.imageRetried = true;
    return this.client.getJob(this.jobId).then((doc) => this.setData(picture(doc)), () => undefined);
  },
});

module.exports = { view };
