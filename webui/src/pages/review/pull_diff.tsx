// What a pull request changes, a page of 100 paths at a time (the API's cursor): never the
// whole diff, so a pull request touching 10,000 paths opens as fast as one touching ten.
import { formatBytes } from "../../components/format";
import { PagedTable } from "../../components/paged_table";
import { Link } from "../../components/router";
import { objectDiffHref } from "../diff/diff_links";
import { type DiffRow, type PullRequest, pullDiffRange, pullsApi } from "./pulls_api";

const CHANGE_LABELS: Record<string, string> = {
  added: "added",
  removed: "removed",
  changed: "changed",
  conflict: "conflict",
  prefix_changed: "changed (directory)",
};

export function PullDiff({ repo, pull }: { repo: string; pull: PullRequest }) {
  const { left, right, type } = pullDiffRange(pull);
  return (
    <PagedTable<DiffRow>
      testId="pull-diff"
      resetKey={`${repo}/${pull.id}/${pull.status}/${pull.merged_commit_id ?? ""}`}
      load={(after, signal) => pullsApi.diff(repo, pull, after, signal)}
      rowKey={(row) => row.path}
      empty="No changes between the branches."
      columns={[
        { title: "Change", cell: (row) => <span class={`change change-${row.type}`}>{CHANGE_LABELS[row.type] ?? row.type}</span> },
        { title: "Path", cell: (row) => <code data-testid="diff-path">{row.path}</code> },
        {
          title: "Size",
          className: "number",
          cell: (row) => (row.path_type === "object" && row.type !== "removed" && row.size_bytes != null ? formatBytes(row.size_bytes) : ""),
        },
        {
          title: "",
          className: "row-actions",
          cell: (row) =>
            row.path_type === "object" ? (
              <Link href={objectDiffHref(repo, left, right, row.path, type)} data-testid="object-diff-link" aria-label={`diff ${row.path}`}>
                diff
              </Link>
            ) : null,
        },
      ]}
    />
  );
}
