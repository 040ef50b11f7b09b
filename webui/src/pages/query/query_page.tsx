// SQL over one CSV, TSV or Parquet object: the object is the table `data`, the server runs the
// query in its sandbox (bounded memory and time, no other files) and answers one page of up to
// 100 rows at a time. A page whose rows do not fit the server's answer is cut short: the next
// page then starts at the answer's next_offset, so no row is skipped.
import { useState } from "preact/hooks";
import { callJson, seg } from "../../api";
import { ErrorNote, Loading } from "../../components/error_page";
import { formatBytes } from "../../components/format";
import { Link } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { objectHref } from "../objects_paths";
import { CellRows } from "../objects_preview";

export const MAX_SQL_BYTES = 16 * 1024;

export interface QueryAnswer {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  /** The result's row the first of `rows` is. */
  offset: number;
  page_size: number;
  has_more: boolean;
  /** Where the next page starts: null when there is none. */
  next_offset?: number | null;
  /** Rows of this page left out to keep the answer within the server's bound. */
  rows_cut?: number;
  /** Cells cut at 1,000 characters. */
  cells_cut?: number;
  /** Null when counting would take too long. */
  total: number | null;
  sample: { rows: number; bytes_read: number; complete: boolean; limit_bytes: number };
}

function runQuery(repo: string, ref: string, path: string, sql: string, offset: number, signal: AbortSignal): Promise<QueryAnswer> {
  return callJson<QueryAnswer>(`/repositories/${seg(repo)}/refs/${seg(ref)}/objects/query`, {
    method: "POST",
    query: { path },
    json: { sql, offset },
    signal,
  });
}

/** The next page's first row: the server's next_offset (a page may be cut short), or a full
 * page on from this one for a server that does not send it. Null when there is no next page. */
export function nextOffset(answer: Pick<QueryAnswer, "offset" | "has_more" | "next_offset" | "rows">): number | null {
  if (typeof answer.next_offset === "number") return answer.next_offset;
  return answer.has_more ? answer.offset + answer.rows.length : null;
}

interface Run {
  sql: string;
  /** The first row of each page shown so far, the current one last: pages differ in length,
   * so "previous" is where the page before began, not an offset less 100. */
  offsets: number[];
  /** Bumped by every click on Run: the same SQL runs again. */
  generation: number;
}

export function QueryPage({ repo, query }: { repo: string; query: URLSearchParams }) {
  const ref = query.get("ref") ?? "";
  const path = query.get("path") ?? "";
  const [sql, setSql] = useState("SELECT * FROM data");
  const [run, setRun] = useState<Run | null>(null);
  const tooLong = new TextEncoder().encode(sql).length > MAX_SQL_BYTES;
  return (
    <section class="query-page" data-testid="query-page">
      <div class="toolbar">
        <h2 class="object-name">
          Query <Link href={objectHref(repo, ref, path)}>{path}</Link> at <code>{ref}</code>
        </h2>
      </div>
      <form
        class="query-form"
        onSubmit={(event) => {
          event.preventDefault();
          if (!tooLong) setRun({ sql, offsets: [0], generation: (run?.generation ?? 0) + 1 });
        }}
      >
        <label>
          <span>
            SQL (the object is the table <code>data</code>; one SELECT statement)
          </span>
          <textarea rows={6} spellcheck={false} value={sql} onInput={(event) => setSql((event.target as HTMLTextAreaElement).value)} aria-label="SQL" />
        </label>
        {tooLong && <p class="error-note">The SQL is longer than {MAX_SQL_BYTES / 1024} KiB.</p>}
        <button type="submit" class="primary" disabled={tooLong || !sql.trim()}>
          Run
        </button>
      </form>
      {run && <Results repo={repo} ref_={ref} path={path} run={run} onPage={(offsets) => setRun({ ...run, offsets })} />}
    </section>
  );
}

function Results({ repo, ref_: ref, path, run, onPage }: { repo: string; ref_: string; path: string; run: Run; onPage: (offsets: number[]) => void }) {
  const offset = run.offsets[run.offsets.length - 1] ?? 0;
  const answer = useAsync((signal) => runQuery(repo, ref, path, run.sql, offset, signal), [repo, ref, path, run.sql, offset, run.generation]);
  if (answer.loading) return <Loading what="results" />;
  if (answer.error !== undefined || !answer.data) return <ErrorNote error={answer.error} />;
  const { columns, rows, total, sample } = answer.data;
  const first = answer.data.offset;
  const next = nextOffset(answer.data);
  const rowsCut = answer.data.rows_cut ?? 0;
  const cellsCut = answer.data.cells_cut ?? 0;
  return (
    <div class="query-results" data-testid="query-results">
      <p class="table-footer">
        <span data-testid="query-info">
          Rows {rows.length ? first + 1 : 0} to {first + rows.length}
          {total !== null ? ` of ${total}` : next !== null ? ", more on the next page" : ""}
        </span>
        {run.offsets.length > 1 && (
          <button type="button" onClick={() => onPage(run.offsets.slice(0, -1))}>
            Previous page
          </button>
        )}
        {next !== null && (
          <button type="button" onClick={() => onPage([...run.offsets, next])}>
            Next page
          </button>
        )}
      </p>
      {(rowsCut > 0 || cellsCut > 0) && (
        <p class="note" data-testid="query-cut">
          {rowsCut > 0 && `This page is cut short: ${rowsCut.toLocaleString()} of its rows did not fit in one answer and start the next page. `}
          {cellsCut > 0 && `${cellsCut.toLocaleString()} cells are cut at 1,000 characters.`}
        </p>
      )}
      {!sample.complete && (
        <p class="note" data-testid="query-sample">
          Large object: the query ran over its first {sample.rows.toLocaleString()} rows ({formatBytes(sample.bytes_read)} of at most {formatBytes(sample.limit_bytes)} read).
        </p>
      )}
      <div class="preview" tabIndex={0} role="region" aria-label="Query results">
        <table data-testid="query-table">
          <thead>
            <tr>
              {columns.map((column, index) => (
                <th key={index} title={column.type}>
                  {column.name}
                </th>
              ))}
            </tr>
          </thead>
          <CellRows rows={rows} />
        </table>
      </div>
    </div>
  );
}
