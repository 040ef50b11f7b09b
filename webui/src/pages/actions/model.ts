// lakeFS Actions as the UI reads them: the REST API's action runs and hook runs (lakeFS's
// shapes), the calls the Actions pages make, and the pure logic shared with the pull request's
// checks and the protection settings (statuses, durations, the comma list of required checks).
import { api, call, type Page, seg } from "../../api";
import { href } from "../../components/router";

export type RunStatus = "completed" | "failed";

export interface ActionRun {
  run_id: string;
  branch: string;
  start_time: string;
  end_time?: string | null;
  event_type: string;
  status: RunStatus;
  /** Empty for a run whose commit never happened (a failed pre-commit). */
  commit_id: string;
}

export interface HookRun {
  hook_run_id: string;
  action: string;
  hook_id: string;
  start_time: string;
  end_time?: string | null;
  status: RunStatus;
}

/** How many runs (or hooks) a page asks for at a time. */
export const PAGE_SIZE = 50;

const runsPath = (repo: string) => `/repositories/${seg(repo)}/actions/runs`;
const runPath = (repo: string, runId: string) => `${runsPath(repo)}/${seg(runId)}`;

export const actionsApi = {
  /** A page of runs, newest first, of one branch and/or one commit when given. */
  runs(repo: string, filter: { branch?: string; commit?: string }, after: string, signal: AbortSignal): Promise<Page<ActionRun>> {
    return api.page<ActionRun>(runsPath(repo), { branch: filter.branch, commit: filter.commit }, after, PAGE_SIZE, signal);
  },
  run(repo: string, runId: string, signal?: AbortSignal): Promise<ActionRun> {
    return api.get<ActionRun>(runPath(repo, runId), undefined, signal);
  },
  hooks(repo: string, runId: string, after: string, signal: AbortSignal): Promise<Page<HookRun>> {
    return api.page<HookRun>(`${runPath(repo, runId)}/hooks`, {}, after, PAGE_SIZE, signal);
  },
  /** A hook's log, as text (the API answers it as octet-stream). */
  async output(repo: string, runId: string, hookRunId: string, signal?: AbortSignal): Promise<string> {
    const response = await call(`${runPath(repo, runId)}/hooks/${seg(hookRunId)}/output`, {
      signal,
      headers: { Accept: "application/octet-stream, text/plain, */*" },
    });
    return response.text();
  },
};

/** The UI URL of the runs list, filtered by branch and/or commit. */
export function runsHref(repo: string, filter: { branch?: string; commit?: string } = {}): string {
  return href(`/repositories/${encodeURIComponent(repo)}/actions`, { branch: filter.branch, commit: filter.commit });
}

/** The UI URL of one run's page. */
export function runHref(repo: string, runId: string): string {
  return href(`/repositories/${encodeURIComponent(repo)}/actions/${encodeURIComponent(runId)}`);
}

/** A status of a run, a hook or a pull request check, by what it means to the reader. */
export type Outcome = "ok" | "failed" | "waiting" | "unknown";

export function outcomeOf(status: string): Outcome {
  switch (status) {
    case "completed":
    case "passed":
      return "ok";
    case "failed":
      return "failed";
    case "pending":
    case "running":
      return "waiting";
    default:
      return "unknown";
  }
}

/** The CSS class of a status badge ("outcome-failed"). */
export function outcomeClass(status: string): string {
  return `outcome-${outcomeOf(status)}`;
}

function millis(value: string | null | undefined): number | null {
  if (!value) return null;
  const time = new Date(value).getTime();
  return Number.isNaN(time) ? null : time;
}

/** How long something took, from two RFC 3339 times: "" without an end (or a bad time). */
export function formatDuration(start: string | null | undefined, end: string | null | undefined): string {
  const from = millis(start);
  const to = millis(end);
  if (from === null || to === null) return "";
  const ms = Math.max(0, to - from);
  if (ms < 1000) return `${ms} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const whole = Math.floor(seconds);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${whole % 60} s`;
  return `${Math.floor(whole / 3600)} h ${Math.floor((whole % 3600) / 60)} min`;
}

/** The names in a comma-separated list: trimmed, empty ones and repeats dropped. */
export function parseCheckList(text: string): string[] {
  const names: string[] = [];
  for (const part of text.split(",")) {
    const name = part.trim();
    if (name && !names.includes(name)) names.push(name);
  }
  return names;
}

/** The list as the input shows it. */
export function formatCheckList(names: readonly string[] | null | undefined): string {
  return (names ?? []).join(", ");
}
