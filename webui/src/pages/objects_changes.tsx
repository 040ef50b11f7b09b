// A branch's uncommitted changes marked in its listing: the branch's diff against its head
// commit (lakeFS's diffBranch), one level deep as the listing is (a folder with changes inside
// is marked as such), and the objects removed since the head shown where they were.
import { api, seg } from "../api";
import { useAsync } from "../components/use_async";
import type { ObjectStats } from "./objects";

export type Change = "added" | "removed" | "changed" | "prefix_changed";

interface DiffRow {
  type: Change;
  path: string;
  path_type: "object" | "common_prefix";
}

// The changes marked: one page of the diff, as many as a listing's page holds.
const MARKED = 1000;

/** What changed since the branch's head, by path; empty for a ref that is not a branch. */
export function useUncommitted(repo: string, ref: string, directory: string, branch: boolean | undefined, listing: unknown): Map<string, Change> {
  const changes = useAsync(
    async (signal) => {
      if (branch !== true) return new Map<string, Change>();
      const page = await api.page<DiffRow>(`/repositories/${seg(repo)}/branches/${seg(ref)}/diff`, { prefix: directory, delimiter: "/" }, "", MARKED, signal);
      return new Map(page.results.map((row) => [row.path, row.type]));
    },
    [repo, ref, directory, branch, listing],
  );
  return changes.data ?? new Map<string, Change>();
}

/** The objects removed since the head, which the listing no longer has, in path order. */
export function removedEntries(changes: Map<string, Change>, listed: ObjectStats[]): string[] {
  const present = new Set(listed.map((item) => item.path));
  return [...changes].filter(([path, change]) => change === "removed" && !present.has(path)).map(([path]) => path).sort();
}

const LABELS: Record<Change, [string, string]> = {
  added: ["added", "Added since the last commit"],
  changed: ["changed", "Changed since the last commit"],
  removed: ["removed", "Removed since the last commit"],
  prefix_changed: ["changes inside", "Holds objects changed since the last commit"],
};

export function ChangeMark({ change }: { change: Change | undefined }) {
  if (!change) return null;
  const [label, title] = LABELS[change];
  return (
    <span class={`change-mark change-${change}`} title={title} data-testid="change-mark" data-change={change}>
      {label}
    </span>
  );
}
