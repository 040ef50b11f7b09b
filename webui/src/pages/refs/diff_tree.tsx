// A diff as a tree of "/"-delimited folders (the API's diff summary): the totals at the top, a
// filter, each folder with what was added, removed and changed under it, its children loaded a
// page at a time when it is expanded, and each changed object linked to its object diff.
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { type Pagination, api } from "../../api";
import { ErrorNote } from "../../components/error_page";
import { formatBytes } from "../../components/format";
import { Link, href } from "../../components/router";
import { useAsync } from "../../components/use_async";

/** Children of a folder shown at a time. */
export const TREE_PAGE = 100;
/** The API's bound on a filter. */
const MAX_FILTER = 256;
/** Typing pauses this long before the filter is asked for. */
const FILTER_DELAY_MS = 300;

type ChangeType = "added" | "removed" | "changed";
const CHANGE_TYPES: ChangeType[] = ["added", "removed", "changed"];
const SIGNS: Record<ChangeType, string> = { added: "+", removed: "−", changed: "~" };

type Stats = Record<ChangeType, { count: number; size_bytes: number }>;

interface Totals {
  count: number;
  stats: Stats;
}

export type TreeRow =
  | { path: string; path_type: "common_prefix"; count: number; stats: Stats }
  | { path: string; path_type: "object"; type: ChangeType; size_bytes: number };

interface Summary {
  totals: Totals;
  prefix_totals: Totals;
  truncated: boolean;
  pagination: Pagination;
  results: TreeRow[];
}

export interface DiffTreeProps {
  /** The API path of the summary (below /api/v1). */
  path: string;
  query?: Record<string, string>;
  resetKey: string;
  empty: string;
  /** The object diff page's refs for a changed path (type three_dot: right's changes since
   * it left left, as a pull request shows them). */
  diffRefs: { left: string; right: string; type?: "three_dot" };
  repo: string;
  /** A last column of actions per row (reset on the changes page). */
  actions?: (row: TreeRow) => ComponentChildren;
  testId?: string;
}

export function DiffTree(props: DiffTreeProps) {
  const [typed, setTyped] = useState("");
  const [filter, setFilter] = useState("");
  useEffect(() => {
    const timer = setTimeout(() => setFilter(typed.trim()), FILTER_DELAY_MS);
    return () => clearTimeout(timer);
  }, [typed]);
  const root = useAsync(
    (signal) => api.get<Summary>(props.path, { ...props.query, filter, amount: TREE_PAGE }, signal),
    [props.path, props.resetKey, filter],
  );
  return (
    <div class="diff-tree" data-testid={props.testId ?? "diff-tree"}>
      <div class="toolbar">
        <input
          type="search"
          class="tree-filter"
          placeholder="Filter paths (text anywhere in the path)"
          aria-label="Filter paths"
          maxLength={MAX_FILTER}
          value={typed}
          onInput={(event) => setTyped(event.currentTarget.value)}
          data-testid="tree-filter"
        />
        {root.data && <TotalsLine totals={root.data.totals} testId="tree-totals" />}
      </div>
      <ErrorNote error={root.error} />
      {root.data?.truncated && <p class="note">This diff is too large to summarize fully: the counts cover its first part only.</p>}
      {root.loading && !root.data && <p class="empty">Loading changes…</p>}
      {root.data && root.data.totals.count === 0 && <p class="empty">{filter ? "No changed path matches the filter." : props.empty}</p>}
      {root.data && !root.loading && root.data.totals.count > 0 && (
        <table class="listing tree-table">
          <thead>
            <tr>
              <th>Path</th>
              <th>Change</th>
              <th>Size</th>
              {props.actions && <th class="row-actions" />}
            </tr>
          </thead>
          <tbody>
            <FolderRows key={`${props.resetKey}\u0000${filter}`} {...props} prefix="" depth={0} filter={filter} first={root.data} />
          </tbody>
        </table>
      )}
    </div>
  );
}

type FolderProps = DiffTreeProps & { prefix: string; depth: number; filter: string; first?: Summary };

/** The children of one folder, page after page on demand; expanded folders nest their own. */
function FolderRows(props: FolderProps) {
  const [pages, setPages] = useState<Summary[]>(props.first ? [props.first] : []);
  const [error, setError] = useState<unknown>(undefined);
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set());
  const load = async (after: string, signal?: AbortSignal) => {
    setError(undefined);
    try {
      const page = await api.get<Summary>(props.path, { ...props.query, filter: props.filter, prefix: props.prefix, after, amount: TREE_PAGE }, signal);
      if (!signal?.aborted) setPages((previous) => [...previous, page]);
    } catch (failure) {
      if (!signal?.aborted) setError(failure);
    }
  };
  useEffect(() => {
    if (props.first) return;
    const controller = new AbortController();
    void load("", controller.signal);
    return () => controller.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  const toggle = (path: string) =>
    setExpanded((previous) => {
      const next = new Set(previous);
      if (next.has(path)) next.delete(path);
      else next.add(path);
      return next;
    });
  const columns = props.actions ? 4 : 3;
  const last = pages[pages.length - 1];
  const indent = { paddingLeft: `${0.4 + props.depth * 1.2}rem` };
  return (
    <>
      {pages.flatMap((page) =>
        page.results.map((row) => {
          const name = row.path.slice(props.prefix.length) || row.path;
          if (row.path_type === "common_prefix") {
            const open = expanded.has(row.path);
            return [
              <tr key={row.path} class="tree-folder" data-testid="tree-folder" data-path={row.path}>
                <td style={indent}>
                  <button type="button" class="tree-toggle" aria-expanded={open} onClick={() => toggle(row.path)} aria-label={`${open ? "Collapse" : "Expand"} ${row.path}`}>
                    {open ? "▾" : "▸"} {name}
                  </button>
                </td>
                <td colSpan={2}>
                  <StatsLine stats={row.stats} />
                </td>
                {props.actions && <td class="row-actions">{props.actions(row)}</td>}
              </tr>,
              open && <FolderRows key={`${row.path}/children`} {...props} first={undefined} prefix={row.path} depth={props.depth + 1} />,
            ];
          }
          return [
            <tr key={row.path} data-testid="tree-object" data-path={row.path}>
              <td style={indent}>
                <Link href={href(`/repositories/${encodeURIComponent(props.repo)}/diff`, { ...props.diffRefs, path: row.path })} data-testid="tree-object-link">
                  <code>{name}</code>
                </Link>
              </td>
              <td>
                <span class={`change change-${row.type}`}>{row.type}</span>
              </td>
              <td>{formatBytes(row.size_bytes)}</td>
              {props.actions && <td class="row-actions">{props.actions(row)}</td>}
            </tr>,
          ];
        }),
      )}
      {(error !== undefined || last?.pagination.has_more || pages.length === 0) && (
        <tr>
          <td colSpan={columns} style={indent}>
            <ErrorNote error={error} />
            {pages.length === 0 && error === undefined && <span class="muted">Loading…</span>}
            {last?.pagination.has_more && (
              <button type="button" onClick={() => void load(last.pagination.next_offset)} data-testid="tree-more">
                More in {props.prefix || "/"}
              </button>
            )}
          </td>
        </tr>
      )}
    </>
  );
}

function StatsLine({ stats }: { stats: Stats }) {
  return (
    <span class="tree-stats">
      {CHANGE_TYPES.filter((type) => stats[type].count > 0).map((type) => (
        <span key={type} class={`change change-${type}`} title={`${stats[type].count} ${type}, ${formatBytes(stats[type].size_bytes)}`}>
          {SIGNS[type]}
          {stats[type].count} ({formatBytes(stats[type].size_bytes)})
        </span>
      ))}
    </span>
  );
}

function TotalsLine({ totals, testId }: { totals: Totals; testId: string }) {
  return (
    <span class="tree-totals" data-testid={testId}>
      {totals.count} {totals.count === 1 ? "change" : "changes"}:{" "}
      {CHANGE_TYPES.map((type) => `${totals.stats[type].count} ${type} (${formatBytes(totals.stats[type].size_bytes)})`).join(", ")}
    </span>
  );
}
