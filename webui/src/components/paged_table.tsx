// A table over a lakeFS-paged list: the first page on mount, then "Load more" fetches the next
// page with the API's cursor (next_offset) and appends it. Nothing ever loads the whole list,
// so a directory of 100,000 entries costs one page per click.
import { type ComponentChildren, Fragment } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { Page } from "../api";
import { ErrorNote, Loading } from "./error_page";

export interface Column<T> {
  title: string;
  cell: (row: T) => ComponentChildren;
  className?: string;
}

export interface PagedTableProps<T> {
  /** One page after the cursor `after` ("" for the first). */
  load: (after: string, signal: AbortSignal) => Promise<Page<T>>;
  columns: Column<T>[];
  rowKey: (row: T) => string;
  /** Changing it starts over from the first page (a new ref, prefix or search). */
  resetKey: string;
  empty?: ComponentChildren;
  testId?: string;
  /** What to show in a full-width row under a row (its expanded details), or nothing. */
  detail?: (row: T) => ComponentChildren;
}

export function PagedTable<T>(props: PagedTableProps<T>) {
  const [rows, setRows] = useState<T[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>(undefined);
  const [controller, setController] = useState<AbortController | null>(null);

  const fetchPage = (after: string, replace: boolean) => {
    controller?.abort();
    const current = new AbortController();
    setController(current);
    setLoading(true);
    setError(undefined);
    props.load(after, current.signal).then(
      (page) => {
        if (current.signal.aborted) return;
        setRows((previous) => (replace ? page.results : [...previous, ...page.results]));
        setNext(page.pagination.has_more ? page.pagination.next_offset : null);
        setLoading(false);
      },
      (failure: unknown) => {
        if (current.signal.aborted) return;
        setError(failure);
        setLoading(false);
      },
    );
  };

  useEffect(() => {
    setRows([]);
    setNext(null);
    fetchPage("", true);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [props.resetKey]);

  return (
    <div class="paged-table" data-testid={props.testId}>
      <table>
        <thead>
          <tr>
            {props.columns.map((column) => (
              <th key={column.title} class={column.className}>
                {column.title}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => {
            const detail = props.detail?.(row);
            return (
              <Fragment key={props.rowKey(row)}>
                <tr>
                  {props.columns.map((column) => (
                    <td key={column.title} class={column.className}>
                      {column.cell(row)}
                    </td>
                  ))}
                </tr>
                {detail != null && detail !== false && (
                  <tr class="detail-row">
                    <td colSpan={props.columns.length}>{detail}</td>
                  </tr>
                )}
              </Fragment>
            );
          })}
        </tbody>
      </table>
      {!loading && !error && rows.length === 0 && <p class="empty">{props.empty ?? "Nothing here."}</p>}
      <ErrorNote error={error} />
      {loading && <Loading />}
      <p class="table-footer">
        <span class="count" data-testid="row-count">
          {rows.length} shown{next !== null ? ", more available" : ""}
        </span>
        {next !== null && !loading && (
          <button type="button" onClick={() => fetchPage(next, false)} data-testid="load-more">
            Load more
          </button>
        )}
      </p>
    </div>
  );
}
