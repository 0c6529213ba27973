// Types of the Chuixiang API client (index.js). The recipe, progress and partial recipe as docs/api.md and the
// API's OpenAPI document (docs/openapi.json) give them; `tsc` checks this file and a use of it in `make test`.

export interface Ingredient {
  name: string;
  amount: string;
}

export interface Ingredients {
  main: Ingredient[];
  auxiliary: Ingredient[];
  seasoning: Ingredient[];
}

export interface Step {
  /** 1..n, in order. */
  order: number;
  text: string;
}

export interface Recipe {
  name: string;
  summary: string;
  ingredients: Ingredients;
  /** 6 to 12 steps. */
  steps: Step[];
  /** Null only when `degraded` lists `extras`. */
  pairings: { side: string; soup: string; staple: string; drink: string } | null;
  nutrition: { caloriesKcal: number; proteinG: number; fatG: number; carbsG: number } | null;
  imagePrompt: string;
}

/** The recipe fields already complete in the stream (until `recipe` supersedes it). */
export interface PartialRecipe {
  name?: string;
  summary?: string;
  ingredients?: Partial<Record<keyof Ingredients, Ingredient[]>>;
  /** While a recipe written in sections has its outline and not all its steps. */
  stepTitles?: string[];
  steps?: Step[];
}

export type SectionState = "waiting" | "writing" | "done" | "dropped";

export interface Progress {
  chars: number;
  tokens: number;
  expectedTokens: number;
  /** 0..100; 100 only once the recipe validated. */
  percent: number;
  etaMs: number | null;
  updatedAt: string;
  /** A recipe written in sections: each section (`outline`, `steps:1-2`, `extras`, `imagePrompt`) and its state. */
  sections?: Record<string, SectionState> | null;
}

export interface ApiError {
  code: string;
  /** A short Chinese sentence for the user. */
  message: string;
  reason?: string;
  retryable?: boolean;
}

export interface JobDocument {
  jobId: string;
  dish?: string;
  status: "PENDING" | "RUNNING" | "SUCCEEDED" | "FAILED";
  stage?: "submit" | "recipe" | "image" | "done";
  recipe?: Recipe | null;
  image?: { url: string; key: string } | null;
  imageError?: ApiError | null;
  error?: ApiError | null;
  progress?: Progress | null;
  partial?: PartialRecipe | null;
  degraded?: Array<"extras" | "imagePrompt"> | null;
  /** Null once the job is terminal. */
  pollAfterMs: number | null;
  deadlineAt: string;
  metrics?: Record<string, unknown>;
}

/** An AbortSignal, or the one `cancellable()` makes where there is no AbortController (a mini-program). */
export interface Signal {
  readonly aborted: boolean;
  readonly reason?: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

export interface Status {
  state: "submitting" | "queued" | "waiting" | "writing" | "drawing" | "offline" | "done";
  /** `queued` and `offline`: when the client tries again (ms since the epoch). */
  retryAt?: number;
}

export interface Request {
  method: "GET" | "POST";
  url: string;
  headers: Record<string, string>;
  body?: string;
  signal?: Signal;
  timeoutMs?: number;
}

export interface Response {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: any;
}

/** Rejects only when no answer came (the network, a timeout); any HTTP status resolves. */
export type RequestFn = (request: Request) => Promise<Response>;

export interface ClientOptions {
  baseUrl: string;
  /**
   * Asked before every request, so a refreshed token is used; with `forceRefresh: true` once after the API refused
   * its token (401): return a new one, not the one kept in storage. A rejection (the sign-in failed) ends the job
   * `UNAUTHORIZED`.
   */
  getToken?: (options: { forceRefresh: boolean }) => string | null | undefined | Promise<string | null | undefined>;
  /** The older name of `getToken` (or a fixed token). */
  token?: string | (() => string | Promise<string>);
  /** Default: `wx.request` where there is a `wx`, else `fetch`. */
  request?: RequestFn;
  /** One request's limit (default 10 s). */
  timeoutMs?: number;
  /** The whole `cook`'s limit (default 360 s, `ClientGiveUpSeconds`). */
  giveUpMs?: number;
}

export interface FollowOptions {
  onProgress?: (doc: JobDocument) => void;
  onStatus?: (status: Status) => void;
  signal?: Signal;
}

export interface Client {
  cook(dish: string, options?: FollowOptions & { idempotencyKey?: string }): Promise<JobDocument>;
  getJob(jobId: string, options?: { signal?: Signal }): Promise<JobDocument>;
  resume(jobId: string, options?: FollowOptions): Promise<JobDocument>;
}

export declare function createClient(options: ClientOptions): Client;
export declare function cancellable(): { signal: Signal; cancel(reason?: unknown): void };
export declare function resolveUrl(base: string, ref: string): string;
export declare function fetchRequest(request: Request): Promise<Response>;
export declare function wxRequest(wx: { request(options: object): { abort(): void } }): RequestFn;
export declare const GIVE_UP_MS: number;
export declare const REQUEST_TIMEOUT_MS: number;
export declare const UNREACHABLE: Readonly<{ code: "API_UNREACHABLE"; message: string }>;
export declare class ApiUnreachableError extends Error {
  readonly code: "API_UNREACHABLE";
  constructor(cause: unknown);
}
export declare class AbortedError extends Error {
  constructor(message?: string);
}
