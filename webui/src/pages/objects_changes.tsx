// A branch's uncommitted changes marked in its listing: the branch's diff against its head
// commit (lakeFS's diffBranch), one level deep as the listing is (a folder with changes inside
// is marked as such) and from the listing page's own start, and the objects removed since the
// head shown under the page's entries.
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

/** What changed since the branch's head, by path, from where the listing's page starts (its
 * `after`, a key); empty for a ref that is not a branch, or when the diff cannot be read. */
export function useUncommitted(repo: string, ref: string, directory: string, after: string, branch: boolean | undefined, listing: unknown): Map<string, Change> {
  const changes = useAsync(
    async (signal) => {
      if (branch !== true) return new Map<string, Change>();
      const page = await api.page<DiffRow>(`/repositories/${seg(repo)}/branches/${seg(ref)}/diff`, { prefix: directory, delimiter: "/" }, after, MARKED, signal);
      return new Map(page.results.map((row) => [row.path, row.type]));
    },
    [repo, ref, directory, after, branch, listing],
  );
  // Marks are an aid: a diff the server refuses leaves the listing as it is.
  return changes.data ?? new Map<string, Change>();
}

/** The objects removed since the head, which the listing no longer has, in path order: those
 * up to the page's last entry when more pages follow (the next page shows the rest). */
export function removedEntries(changes: Map<string, Change>, listed: ObjectStats[], more = false): string[] {
  const present = new Set(listed.map((item) => item.path));
  const last = listed.length ? listed[listed.length - 1].path : "";
  return [...changes]
    .filter(([path, change]) => change === "removed" && !present.has(path) && (!more || path < last))
    .map(([path]) => path)
    .sort();
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
