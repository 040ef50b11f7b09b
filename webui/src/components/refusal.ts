// Why the server refused a change, read from its answer: a pre-event hook (lakeFS's 412, whose
// message names the run: "pre-commit hook aborted, run id '<id>': <why>"), a branch protection
// rule (lakeFS's 403 "cannot write to protected branch" / "cannot commit to protected branch"),
// or a merge conflict (409 "conflict found"). Pages name the cause and link to it (the run's
// page, the repository's protection settings) instead of a bare "Something went wrong".
import { ApiError, api, seg } from "../api";
import { useAsync } from "./use_async";

export type Refusal =
  | { kind: "hook"; event: string; runId: string; detail: string }
  | { kind: "protection"; message: string }
  | { kind: "conflict"; message: string };

const HOOK = /^(\S+) hook aborted, run id '([^']+)'(?::\s*([\s\S]*))?$/;
const PROTECTED = ["cannot write to protected branch", "cannot commit to protected branch"];
const CONFLICT = "conflict found";

/** The cause of a refusal the UI can name, or null for any other failure. */
export function refusalOf(error: unknown): Refusal | null {
  if (!(error instanceof ApiError)) return null;
  const hook = HOOK.exec(error.message);
  if (hook) return { kind: "hook", event: hook[1], runId: hook[2], detail: (hook[3] ?? "").trim() };
  if (error.status === 403 && PROTECTED.some((sentence) => error.message.startsWith(sentence))) {
    return { kind: "protection", message: error.message };
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

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A protection pattern as a RegExp over whole branch names, as graveler matches it:
 * `*` within a segment, `**` across `/`, `**` + `/` at a segment's start any whole segments. */
export function patternRegExp(pattern: string): RegExp {
  let source = "";
  for (let i = 0; i < pattern.length; ) {
    if (pattern.startsWith("**", i)) {
      const startsSegment = i === 0 || pattern[i - 1] === "/";
      if (startsSegment && pattern[i + 2] === "/") {
        source += "(?:.*/)?";
        i += 3;
      } else {
        source += ".*";
        i += 2;
      }
    } else if (pattern[i] === "*") {
      source += "[^/]*";
      i += 1;
    } else {
      source += escapeRegExp(pattern[i]);
      i += 1;
    }
  }
  return new RegExp(`^${source}$`, "s");
}

/** The rules whose pattern matches the branch. */
export function rulesFor(rules: readonly ProtectionRule[], branch: string): ProtectionRule[] {
  return rules.filter((rule) => patternRegExp(rule.pattern).test(branch));
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
