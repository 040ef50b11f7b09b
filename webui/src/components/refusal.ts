// Why the server refused a change, read from its answer: a pre-event hook (lakeFS's 412, whose
// message names the run: "pre-commit hook aborted, run id '<id>': <why>"), a branch protection
// rule (lakeFS's 403 with the JSON error's typed `branch_protection`: the branch and the rules
// that matched it), or a merge conflict (409 "conflict found"). Pages name the cause and link to
// it (the run's page, the repository's protection settings) instead of a bare "Something went
// wrong".
import { ApiError, api, seg } from "../api";
import { useAsync } from "./use_async";

export type Refusal =
  | { kind: "hook"; event: string; runId: string; detail: string }
  | { kind: "protection"; message: string; branch: string; rules: string[] }
  | { kind: "conflict"; message: string };

const HOOK = /^(\S+) hook aborted, run id '([^']+)'(?::\s*([\s\S]*))?$/;
const CONFLICT = "conflict found";

/** The cause of a refusal the UI can name, or null for any other failure. */
export function refusalOf(error: unknown): Refusal | null {
  if (!(error instanceof ApiError)) return null;
  if (error.status === 412) {
    const hook = HOOK.exec(error.message);
    if (hook) return { kind: "hook", event: hook[1], runId: hook[2], detail: (hook[3] ?? "").trim() };
  }
  if (error.status === 403 && error.protection) {
    return { kind: "protection", message: error.message, branch: error.protection.branch, rules: error.protection.rules };
  }
  if (error.status === 409 && error.message.startsWith(CONFLICT)) return { kind: "conflict", message: error.message };
  return null;
}

/** One branch protection rule as the API shows it (lakeFS's {pattern} plus Silt's fields). */
export interface ProtectionRule {
  pattern: string;
  block_direct_writes?: boolean;
  required_approvals?: number;
  required_checks?: string[];
}

type Piece = { kind: "char"; char: string } | { kind: "segment" } | { kind: "anything" } | { kind: "segments" };

/** A protection pattern's pieces, as graveler reads it (engine/core/committed/globs.py): `*`
 * within a segment, `**` across `/`, `**` + `/` at a segment's start any whole segments. */
function pieces(pattern: string): Piece[] {
  const found: Piece[] = [];
  for (let i = 0; i < pattern.length; ) {
    if (pattern.startsWith("**", i)) {
      const startsSegment = i === 0 || pattern[i - 1] === "/";
      if (startsSegment && pattern[i + 2] === "/") {
        found.push({ kind: "segments" });
        i += 3;
      } else {
        found.push({ kind: "anything" });
        i += 2;
      }
    } else if (pattern[i] === "*") {
      found.push({ kind: "segment" });
      i += 1;
    } else {
      found.push({ kind: "char", char: pattern[i] });
      i += 1;
    }
  }
  return found;
}

/** Whether a protection pattern matches a whole branch name, as graveler matches it, in time
 * linear in the name (every position of the pattern followed at once). Graveler uses RE2 for
 * this reason: a backtracking RegExp takes time exponential in the wildcards on a pattern like
 * `*a*a*a*a*a*a*b` over a long name of `a`s, which would freeze the page of everyone who opens
 * such a branch. */
export function patternMatches(pattern: string, name: string): boolean {
  const glob = pieces(pattern);
  const end = glob.length;
  // States: i (0..end) "before piece i"; end + 1 + i "inside the `**/` piece i, owing a '/'".
  const add = (states: Set<number>, i: number): void => {
    if (states.has(i)) return;
    states.add(i);
    if (i < end && glob[i].kind !== "char") add(states, i + 1); // a wildcard may match nothing
  };
  let states = new Set<number>();
  add(states, 0);
  for (let k = 0; k < name.length && states.size > 0; k++) {
    const char = name[k];
    const next = new Set<number>();
    for (const state of states) {
      if (state > end) {
        next.add(state);
        if (char === "/") add(next, state - end);
        continue;
      }
      if (state === end) continue;
      const piece = glob[state];
      if (piece.kind === "char") {
        if (piece.char === char) add(next, state + 1);
      } else if (piece.kind === "segment") {
        if (char !== "/") add(next, state);
      } else if (piece.kind === "anything") {
        add(next, state);
      } else {
        next.add(end + 1 + state);
        if (char === "/") add(next, state + 1);
      }
    }
    states = next;
  }
  return states.has(end);
}

/** The rules whose pattern matches the branch. */
export function rulesFor(rules: readonly ProtectionRule[], branch: string): ProtectionRule[] {
  return rules.filter((rule) => patternMatches(rule.pattern, branch));
}

/** Whether a rule keeps direct writes (uploads, deletes, commits) off its branches: a lakeFS
 * rule ({pattern} alone) does. */
export function blocksWrites(rule: ProtectionRule): boolean {
  return rule.block_direct_writes ?? true;
}

/** The repository's protection rules (readable by its readers). */
export function protectionRules(repo: string, signal?: AbortSignal): Promise<ProtectionRule[]> {
  return api.get<ProtectionRule[]>(`/repositories/${seg(repo)}/settings/branch_protection`, undefined, signal);
}

/** The repository a UI path is of ("/repositories/<repo>/..."), or "". */
export function repoOfPath(path: string): string {
  const parts = path.split("/");
  if (parts[1] !== "repositories" || !parts[2]) return "";
  try {
    return decodeURIComponent(parts[2]);
  } catch {
    return parts[2];
  }
}

/** The patterns of the rules that keep direct writes off `branch` ("" for none: not a branch),
 * [] until known or when the rules cannot be read (the server still refuses what they forbid). */
export function useWriteProtection(repo: string, branch: string): string[] {
  const rules = useAsync((signal) => (branch ? protectionRules(repo, signal).catch(() => []) : Promise.resolve([])), [repo, branch]);
  return branch && rules.data ? rulesFor(rules.data, branch).filter(blocksWrites).map((rule) => rule.pattern) : [];
}
