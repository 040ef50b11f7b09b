// The one way pages talk to the server: same-origin calls to the REST API with the login
// cookie. A failed call becomes an ApiError carrying the API's own message (lakeFS's JSON error
// body `{"message": ...}`), so pages can show it as it is.

export const API_BASE = "/api/v1";

/** The branch protection that refused a change, as the API's JSON error carries it next to
 * lakeFS's message (`branch_protection`): the branch and the patterns of the rules matching it. */
export interface ProtectionRefusal {
  branch: string;
  rules: string[];
}

export class ApiError extends Error {
  readonly status: number;
  readonly protection: ProtectionRefusal | null;

  constructor(status: number, message: string, protection: ProtectionRefusal | null = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.protection = protection;
  }

  get forbidden(): boolean {
    return this.status === 403;
  }

  get unauthenticated(): boolean {
    return this.status === 401;
  }
}

export type Query = Record<string, string | number | boolean | undefined | null>;

/** lakeFS's pagination block of every list answer. */
export interface Pagination {
  has_more: boolean;
  next_offset: string;
  results: number;
  max_per_page: number;
}

export interface Page<T> {
  pagination: Pagination;
  results: T[];
}

/** The API URL of `path` (starting with "/", below /api/v1) with `query`. */
export function apiUrl(path: string, query: Query = {}): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
  }
  const search = params.toString();
  return API_BASE + path + (search ? "?" + search : "");
}

/** Encodes one path segment (a repository, branch or tag name) for an API path. */
export function seg(value: string): string {
  return encodeURIComponent(value);
}

// Listeners told when any call answers 401: the session is gone, so the app shows the login page.
const unauthenticatedListeners = new Set<() => void>();

export function onUnauthenticated(listener: () => void): () => void {
  unauthenticatedListeners.add(listener);
  return () => unauthenticatedListeners.delete(listener);
}

function protectionOf(body: object): ProtectionRefusal | null {
  if (!("branch_protection" in body)) return null;
  const field: unknown = body.branch_protection;
  if (!field || typeof field !== "object" || !("branch" in field) || typeof field.branch !== "string") return null;
  const rules = "rules" in field && Array.isArray(field.rules) ? field.rules.filter((rule): rule is string => typeof rule === "string") : [];
  return { branch: field.branch, rules };
}

/** The ApiError of a failed answer: its status, the JSON error's message (the status line when
 * the body is not lakeFS's JSON error: a proxy's page, say) and its typed fields. */
export function apiErrorOf(status: number, statusText: string, bodyText: string): ApiError {
  let message = `${status} ${statusText}`.trim();
  let protection: ProtectionRefusal | null = null;
  try {
    const body: unknown = JSON.parse(bodyText);
    if (body && typeof body === "object") {
      if ("message" in body && typeof body.message === "string") message = body.message;
      protection = protectionOf(body);
    }
  } catch {
    // Not JSON: the status line is the best message there is.
  }
  return new ApiError(status, message, protection);
}

async function errorOf(response: Response): Promise<ApiError> {
  const text = await response.text().catch(() => "");
  return apiErrorOf(response.status, response.statusText, text);
}

export interface CallOptions {
  method?: string;
  query?: Query;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as is (multipart form, raw bytes). */
  body?: BodyInit;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** A 401 on this call does not end the session (the login call itself). */
  quiet401?: boolean;
}

/** The raw Response of a successful call; throws ApiError otherwise. */
export async function call(path: string, options: CallOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { Accept: "application/json", ...options.headers };
  let body = options.body;
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.json);
  }
  let response: Response;
  try {
    response = await fetch(apiUrl(path, options.query), {
      method: options.method ?? "GET",
      headers,
      body,
      credentials: "same-origin",
      signal: options.signal,
    });
  } catch (error) {
    if (error instanceof DOMException && error.name === "AbortError") throw error;
    throw new ApiError(0, "the server could not be reached");
  }
  if (!response.ok) {
    const error = await errorOf(response);
    if (error.unauthenticated && !options.quiet401) unauthenticatedListeners.forEach((listener) => listener());
    throw error;
  }
  return response;
}

/** A call answering JSON (or nothing: 204 gives undefined). */
export async function callJson<T>(path: string, options: CallOptions = {}): Promise<T> {
  const response = await call(path, options);
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export const api = {
  get<T>(path: string, query?: Query, signal?: AbortSignal): Promise<T> {
    return callJson<T>(path, { query, signal });
  },
  post<T>(path: string, json?: unknown, query?: Query): Promise<T> {
    return callJson<T>(path, { method: "POST", json: json ?? {}, query });
  },
  put<T>(path: string, json?: unknown, query?: Query): Promise<T> {
    return callJson<T>(path, { method: "PUT", json: json ?? {}, query });
  },
  patch<T>(path: string, json?: unknown, query?: Query): Promise<T> {
    return callJson<T>(path, { method: "PATCH", json: json ?? {}, query });
  },
  del<T = void>(path: string, query?: Query): Promise<T> {
    return callJson<T>(path, { method: "DELETE", query });
  },
  /** One page of a lakeFS list: `after` is the previous page's next_offset. */
  page<T>(path: string, query: Query, after: string, amount: number, signal?: AbortSignal): Promise<Page<T>> {
    return callJson<Page<T>>(path, { query: { ...query, after, amount }, signal });
  },
};

/** Every page of a (short) list, up to `limit` results: for pickers, never for big listings. */
export async function allPages<T>(path: string, query: Query, limit: number): Promise<T[]> {
  const results: T[] = [];
  let after = "";
  while (results.length < limit) {
    const page = await api.page<T>(path, query, after, Math.min(1000, limit - results.length));
    results.push(...page.results);
    if (!page.pagination.has_more) break;
    after = page.pagination.next_offset;
  }
  return results;
}

/** A message for any thrown value. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
