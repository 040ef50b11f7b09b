// A paged diff (a branch's uncommitted changes, a commit against its parent, two refs): each
// path with what happened to it, one API page at a time.
import type { ComponentChildren } from "preact";
import { api } from "../../api";
import { formatBytes } from "../../components/format";
import { type Column, PagedTable } from "../../components/paged_table";
import { Link } from "../../components/router";
import { diffRefsOf, objectDiffHref } from "../diff/diff_links";
import { type DiffRow, PAGE_SIZE } from "./model";

const CHANGE_LABELS: Record<DiffRow["type"], string> = {
  added: "added",
  removed: "removed",
  changed: "changed",
  prefix_changed: "changed (prefix)",
};

export interface DiffTableProps {
  /** The API path of the diff list (below /api/v1). */
  path: string;
  query?: Record<string, string>;
  resetKey: string;
  empty: string;
  /** A last column of actions per row (reset on the changes page). */
  actions?: (row: DiffRow) => ComponentChildren;
  testId?: string;
}

/** The repository named in a diff list's API path. */
function repoOf(apiPath: string): string {
  return decodeURIComponent(apiPath.split("/")[2] ?? "");
}

export function DiffTable(props: DiffTableProps) {
  const refs = diffRefsOf(props.path, props.query?.type);
  const columns: Column<DiffRow>[] = [
    {
      title: "Change",
      cell: (row) => <span class={`change change-${row.type}`}>{CHANGE_LABELS[row.type]}</span>,
      className: "change-cell",
    },
    { title: "Path", cell: (row) => <code>{row.path}</code> },
    {
      title: "Size",
      cell: (row) => (row.size_bytes !== undefined && row.size_bytes !== null && row.type !== "removed" ? formatBytes(row.size_bytes) : ""),
    },
  ];
  if (refs) {
    columns.push({
      title: "",
      className: "row-actions",
      cell: (row) =>
        row.path_type === "object" ? (
          <Link href={objectDiffHref(repoOf(props.path), refs.left, refs.right, row.path, refs.type)} data-testid="object-diff-link" aria-label={`diff ${row.path}`}>
            diff
          </Link>
        ) : null,
    });
  }
  if (props.actions) columns.push({ title: "", cell: props.actions, className: "row-actions" });
  return (
    <PagedTable<DiffRow>
      load={(after, signal) => api.page<DiffRow>(props.path, props.query ?? {}, after, PAGE_SIZE, signal)}
      columns={columns}
      rowKey={(row) => row.path}
      resetKey={props.resetKey}
      empty={props.empty}
      testId={props.testId ?? "diff-table"}
    />
  );
}
