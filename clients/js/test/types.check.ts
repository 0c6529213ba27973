// A use of the client's types as a TypeScript front end writes it: `tsc -p clients/js` checks it (make test).
import { cancellable, createClient, type JobDocument, type Status } from "../index.js";

const client = createClient({ baseUrl: "https://api.example.cn/api", getToken: async () => "token", timeoutMs: 5000 });
const cancel = cancellable();
const states: Status["state"][] = [];

function render(doc: JobDocument): string {
  const name: string | undefined = doc.recipe?.name ?? doc.partial?.name;
  const firstStep: string | undefined = doc.recipe?.steps[0]?.text ?? doc.partial?.stepTitles?.[0];
  const percent: number = doc.progress?.percent ?? 0;
  const sections: string = Object.entries(doc.progress?.sections ?? {}).map(([s, state]) => `${s}:${state}`).join(",");
  const main: string[] = (doc.recipe?.ingredients.main ?? []).map((i) => `${i.name} ${i.amount}`);
  return [name, firstStep, percent, sections, ...main].join(" ");
}

export async function cook(dish: string): Promise<string> {
  const job = await client.cook(dish, { onProgress: render, onStatus: (s) => states.push(s.state), signal: cancel.signal });
  if (job.status === "FAILED") return job.error?.retryable ? `${job.error.message} (retry)` : job.error?.message ?? "";
  const calories: number | undefined = job.recipe?.nutrition?.caloriesKcal;
  return `${render(job)} ${calories ?? ""} ${job.image?.url ?? ""}`;
}

export async function again(jobId: string): Promise<JobDocument> {
  return client.resume(jobId, { onStatus: (s) => s.retryAt });
}

// The client's functions work taken off it, as React and Vue code destructures it.
const { cook: cookAlone, getJob: getJobAlone, resume: resumeAlone } = client;
void cookAlone("番茄炒蛋");
void getJobAlone("j1");
void resumeAlone("j1");
const refreshing = createClient({
  baseUrl: "https://api.example.cn",
  getToken: async ({ forceRefresh }) => (forceRefresh ? "fresh" : "kept"),
});
void refreshing;
