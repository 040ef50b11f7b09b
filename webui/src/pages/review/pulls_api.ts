// The REST API of pull requests as the review pages use it: lakeFS's `pulls` endpoints plus
// Silt's reviews and comments, and the fields that say why a merge is blocked.
import { api, type Page, seg } from "../../api";

export type PullStatus = "open" | "closed" | "merged";
export type Verdict = "approve" | "request_changes";
export type MergeStrategy = "" | "source-wins" | "dest-wins";
export type CheckStatus = "pending" | "running" | "passed" | "failed";

/** One check of a pull request: a hook of an action on `pull-request` events, run on the
 * source's head (Silt's; lakeFS has no checks). */
export interface PullCheck {
  /** "<action name>/<hook id>" */
  name: string;
  status: CheckStatus;
  /** The source head the check ran (or runs) on. */
  commit_id: string;
  run_id?: string;
  hook_run_id?: string;
  started_at?: string | null;
  ended_at?: string | null;
  /** Why it failed, short; "" otherwise. */
  error?: string;
}

export interface PullRequest {
  id: string;
  status: PullStatus;
  title: string;
  description: string;
  author: string;
  source_branch: string;
  destination_branch: string;
  creation_date: string;
  closed_date?: string | null;
  merged_commit_id?: string | null;
  /** Silt's standing of the source's current head against the destination's protection. */
  approvals: number;
  required_approvals: number;
  merge_blocked_reason: string;
  /** The source head's checks, and the names the destination's protection requires to pass. */
  checks?: PullCheck[];
  required_checks?: string[];
}

export interface Review {
  author: string;
  verdict: Verdict;
  body: string;
  creation_date: string;
  commit_id: string;
  /** Of the source's current head: only current reviews count. */
  current: boolean;
}

export interface Reviews {
  results: Review[];
  approvals: number;
  required_approvals: number;
}

export interface Comment {
  id: string;
  author: string;
  body: string;
  creation_date: string;
}

export interface DiffRow {
  type: string;
  path: string;
  path_type: string;
  size_bytes?: number | null;
}

export interface Branch {
  id: string;
  commit_id: string;
}

/** What the pull request changes: the source against its merge base with the destination
 * while open; the merge commit against its first parent once merged. */
export function pullDiffRange(pr: PullRequest): { left: string; right: string; type: "two_dot" | "three_dot" } {
  if (pr.status === "merged" && pr.merged_commit_id) {
    return { left: `${pr.merged_commit_id}~1`, right: pr.merged_commit_id, type: "two_dot" };
  }
  return { left: pr.destination_branch, right: pr.source_branch, type: "three_dot" };
}

const pulls = (repo: string) => `/repositories/${seg(repo)}/pulls`;
const pull = (repo: string, id: string) => `${pulls(repo)}/${seg(id)}`;

export const pullsApi = {
  list(repo: string, status: string, after: string, amount: number, signal: AbortSignal): Promise<Page<PullRequest>> {
    return api.page<PullRequest>(pulls(repo), { status }, after, amount, signal);
  },
  create(repo: string, body: { title: string; description: string; source_branch: string; destination_branch: string }) {
    return api.post<{ id: string }>(pulls(repo), body);
  },
  get(repo: string, id: string, signal?: AbortSignal): Promise<PullRequest> {
    return api.get<PullRequest>(pull(repo, id), undefined, signal);
  },
  update(repo: string, id: string, body: { status?: "open" | "closed"; title?: string; description?: string }) {
    return api.patch<void>(pull(repo, id), body);
  },
  /** `strategy`: "" (conflicts fail the merge), "source-wins" or "dest-wins". */
  merge(repo: string, id: string, strategy: MergeStrategy): Promise<{ reference: string }> {
    return api.put<{ reference: string }>(pull(repo, id) + "/merge", { strategy });
  },
  /** Runs a check again on the source's current head (asynchronously: it goes back to pending). */
  rerunCheck(repo: string, id: string, name: string): Promise<PullRequest> {
    return api.post<PullRequest>(pull(repo, id) + "/checks/rerun", { name });
  },
  reviews(repo: string, id: string, signal?: AbortSignal): Promise<Reviews> {
    return api.get<Reviews>(pull(repo, id) + "/reviews", undefined, signal);
  },
  review(repo: string, id: string, verdict: Verdict, body: string): Promise<PullRequest> {
    return api.post<PullRequest>(pull(repo, id) + "/reviews", { verdict, body });
  },
  comments(repo: string, id: string, after: string, signal: AbortSignal): Promise<Page<Comment>> {
    return api.page<Comment>(pull(repo, id) + "/comments", {}, after, 100, signal);
  },
  comment(repo: string, id: string, body: string): Promise<Comment> {
    return api.post<Comment>(pull(repo, id) + "/comments", { body });
  },
  diff(repo: string, pr: PullRequest, after: string, signal: AbortSignal): Promise<Page<DiffRow>> {
    const { left, right, type } = pullDiffRange(pr);
    return api.page<DiffRow>(`/repositories/${seg(repo)}/refs/${seg(left)}/diff/${seg(right)}`, { type }, after, 100, signal);
  },
  branches(repo: string, prefix: string, signal?: AbortSignal): Promise<Page<Branch>> {
    return api.page<Branch>(`/repositories/${seg(repo)}/branches`, { prefix }, "", 100, signal);
  },
};

/** One line of the checks list: a check the pull request has, or a required one it lacks. */
export interface CheckRow {
  name: string;
  check: PullCheck | null;
  required: boolean;
}

/** The checks in the server's order, then the required names no check reported (yet). */
export function checkRows(checks: readonly PullCheck[] | null | undefined, required: readonly string[] | null | undefined): CheckRow[] {
  const wanted = new Set(required ?? []);
  const rows: CheckRow[] = (checks ?? []).map((check) => ({ name: check.name, check, required: wanted.has(check.name) }));
  const seen = new Set(rows.map((row) => row.name));
  for (const name of required ?? []) {
    if (!seen.has(name)) {
      seen.add(name);
      rows.push({ name, check: null, required: true });
    }
  }
  return rows;
}

/** Whether a check is still to finish, so the page keeps refreshing the pull request. */
export function checksInProgress(checks: readonly PullCheck[] | null | undefined): boolean {
  return (checks ?? []).some((check) => check.status === "pending" || check.status === "running");
}

