// The demo page: cook a dish with the client, show the progress, the recipe as it fills in, the picture, or
// the error's message. No framework: a form, a bar and a few lists.
import { createClient } from "./client.js";
import { API_BASE } from "./config.js";

const client = createClient({ baseUrl: API_BASE });
const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));

/** @param {string} id @param {string[]} items */
function list(id, items) {
  const target = $(id);
  target.replaceChildren(...items.map((text) => Object.assign(document.createElement("li"), { textContent: text })));
  $(`${id}-title`).hidden = items.length === 0;
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

/** What the page shows for one polled document. @param {import("./client.js").JobDocument} doc */
function show(doc) {
  $("status").hidden = false;
  const percent = doc.status === "SUCCEEDED" ? 100 : (doc.progress?.percent ?? (doc.status === "RUNNING" ? 5 : 0));
  $("bar").style.width = `${percent}%`;
  $("progress").setAttribute("aria-valuenow", String(percent));
  $("phase").textContent =
    doc.status === "SUCCEEDED" ? "做好了" :
    doc.status === "FAILED" ? "" :
    doc.stage === "image" ? "菜谱写好了，正在画成品图…" :
    doc.progress ? `正在写菜谱… ${percent}%` : "正在思考…";
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
  }
  if (doc.image?.url) {
    const img = /** @type {HTMLImageElement} */ ($("picture"));
    if (img.src !== doc.image.url) img.src = doc.image.url;
    img.alt = recipe?.name ?? "";
    img.hidden = false;
  }
  if (doc.status === "FAILED" && doc.error) {
    $("error").textContent = doc.error.message;
    $("error").dataset.code = doc.error.code;
    $("error").hidden = false;
  }
}

$("cook").addEventListener("submit", async (event) => {
  event.preventDefault();
  const dish = /** @type {HTMLInputElement} */ ($("dish")).value.trim();
  const go = /** @type {HTMLButtonElement} */ ($("go"));
  go.disabled = true;
  $("error").hidden = true;
  $("recipe").hidden = true;
  /** @type {HTMLImageElement} */ ($("picture")).hidden = true;
  document.body.dataset.state = "cooking";
  try {
    const job = await client.cook(dish, { onProgress: show });
    show(job);
    document.body.dataset.state = job.status.toLowerCase();
  } catch (error) {
    $("error").textContent = /** @type {Error} */ (error).message;
    $("error").hidden = false;
    document.body.dataset.state = "failed";
  } finally {
    go.disabled = false;
  }
});
