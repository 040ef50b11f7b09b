// Merging one ref into a branch. A conflict is an answer the page shows path by path (the API's
// 409 lists them in `conflicts`), not only an error message, so this call reads the answer's
// body itself instead of going through api.ts, which keeps only the message of a failure.
import { ApiError, api, apiErrorOf, apiUrl, seg } from "../../api";
import { repoPath } from "./model";

export type Strategy = "" | "dest-wins" | "source-wins";

export interface Conflict {
  path: string;
  source: string;
  destination: string;
}

/** An Iceberg table both sides changed in ways the merge does not combine, and why. */
export interface TableConflict {
  table: string;
  reason: string;
}

export type MergeOutcome =
  | { kind: "merged"; commitId: string }
  | { kind: "conflicts"; message: string; conflicts: Conflict[]; truncated: boolean; tables: TableConflict[] };

interface MergeAnswer {
  reference?: string;
  message?: string;
  conflicts?: Conflict[];
  conflicts_truncated?: boolean;
  tables?: TableConflict[];
}

export async function mergeRefs(
  repo: string,
  source: string,
  destination: string,
  strategy: Strategy,
  message: string,
): Promise<MergeOutcome> {
  const path = `${repoPath(repo)}/refs/${seg(source)}/merge/${seg(destination)}`;
  let response: Response;
  try {
    response = await fetch(apiUrl(path), {
      method: "POST",
      headers: { Accept: "application/json", "Content-Type": "application/json" },
      body: JSON.stringify({ strategy: strategy || undefined, message: message || undefined }),
      credentials: "same-origin",
    });
  } catch {
    throw new ApiError(0, "the server could not be reached");
  }
  const body = await response.text().catch(() => "");
  let answer: MergeAnswer = {};
  try {
    answer = JSON.parse(body) as MergeAnswer;
  } catch {
    // Not JSON (a proxy's page, say): the status line is the best message there is.
  }
  if (response.ok) return { kind: "merged", commitId: answer.reference ?? "" };
  const text = answer.message ?? `${response.status} ${response.statusText}`.trim();
  if (response.status !== 409) throw apiErrorOf(response.status, response.statusText, body);
  return {
    kind: "conflicts",
    message: text,
    conflicts: answer.conflicts ?? [],
    truncated: answer.conflicts_truncated ?? false,
    tables: answer.tables ?? [],
  };
}

/** What merging `source` into `destination` would meet now, asked without merging. */
export interface MergeCheck {
  source_commit_id: string;
  destination_commit_id: string;
  base_commit_id: string;
  mergeable: boolean;
  conflicts: Conflict[];
  conflicts_truncated: boolean;
  /** Iceberg tables the merge combines (their pointers are not listed as conflicts). */
  tables_combined?: string[];
  tables?: TableConflict[];
}

export function checkMerge(repo: string, source: string, destination: string, signal?: AbortSignal): Promise<MergeCheck> {
  return api.get<MergeCheck>(`${repoPath(repo)}/refs/${seg(source)}/merge/${seg(destination)}/conflicts`, undefined, signal);
}

/** Whether the merge would have nothing to bring: the source's head is the merge base, already
 * in the destination (the API would answer 400 "no changes"). */
export function nothingToMerge(check: MergeCheck): boolean {
  return check.source_commit_id !== "" && check.source_commit_id === check.base_commit_id;
}
