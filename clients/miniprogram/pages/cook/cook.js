// One page: name a dish, follow its job with the client, show what docs/api.md's "what a mini-program shows"
// table says (the wait, progress and ETA, the partial recipe and step titles, the error with a retry button for
// retryable codes, the picture or its placeholder, the panels a degraded recipe hides).
const { createClient, cancellable } = require("../../lib/chuixiang.js");

const WAITING = { submitting: "正在提交…", queued: "做菜的人有点多，正在排队…", waiting: "正在排队/思考…",
  writing: "正在写菜谱…", drawing: "菜谱写好了，正在画成品图…", offline: "网络不太好，正在重试…", done: "" };

/** What the page shows of one job document (pure: the page test checks it without a network). */
function view(doc) {
  const recipe = doc.recipe || doc.partial || null;
  const progress = doc.progress || null;
  return {
    percent: doc.status === "SUCCEEDED" ? 100 : progress ? progress.percent : 0,
    eta: progress && progress.etaMs ? `约 ${Math.ceil(progress.etaMs / 1000)} 秒` : "",
    name: recipe ? recipe.name || "" : "",
    summary: recipe ? recipe.summary || "" : "",
    ingredients: recipe ? ingredientLines(recipe.ingredients) : [],
    steps: recipe ? (recipe.steps || recipe.stepTitles || []).map((s) => (typeof s === "string" ? s : s.text)) : [],
    imageUrl: doc.image && doc.image.url ? doc.image.url : "",
    imagePlaceholder: doc.status === "SUCCEEDED" && !(doc.image && doc.image.url),
    showExtras: Boolean(doc.recipe) && !(doc.degraded || []).includes("extras"),
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
    this.client = createClient({ baseUrl: getApp().globalData.apiBase });
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
    this.setData({ cooking: true, ...view({ status: "PENDING" }) });
    return this.client
      .cook(dish, {
        signal: this.cancel.signal,
        onProgress: (doc) => this.setData(view(doc)),
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
});

module.exports = { view };
