// SQL over one CSV, TSV or Parquet object: the object is the table `data`, the server runs the
// query in its sandbox (bounded memory and time, no other files) and answers one page of 100
// rows at a time.
import { useState } from "preact/hooks";
import { callJson, seg } from "../../api";
import { ErrorNote, Loading } from "../../components/error_page";
import { formatBytes } from "../../components/format";
import { Link } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { objectHref } from "../objects_paths";
import { cellText } from "../objects_preview";

export const MAX_SQL_BYTES = 16 * 1024;

export interface QueryAnswer {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  page: number;
  page_size: number;
  has_more: boolean;
  total: number | null;
  sample: { rows: number; bytes_read: number; complete: boolean; limit_bytes: number };
}

function runQuery(repo: string, ref: string, path: string, sql: string, page: number, signal: AbortSignal): Promise<QueryAnswer> {
  return callJson<QueryAnswer>(`/repositories/${seg(repo)}/refs/${seg(ref)}/objects/query`, {
    method: "POST",
    query: { path },
    json: { sql, page },
    signal,
  });
}

interface Run {
  sql: string;
  page: number;
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
          if (!tooLong) setRun({ sql, page: 0, generation: (run?.generation ?? 0) + 1 });
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
      {run && <Results repo={repo} ref_={ref} path={path} run={run} onPage={(page) => setRun({ ...run, page })} />}
    </section>
  );
}

function Results({ repo, ref_: ref, path, run, onPage }: { repo: string; ref_: string; path: string; run: Run; onPage: (page: number) => void }) {
  const answer = useAsync((signal) => runQuery(repo, ref, path, run.sql, run.page, signal), [repo, ref, path, run.sql, run.page, run.generation]);
  if (answer.loading) return <Loading what="results" />;
  if (answer.error !== undefined || !answer.data) return <ErrorNote error={answer.error} />;
  const { columns, rows, page, page_size: size, has_more: more, total, sample } = answer.data;
  const first = page * size;
  return (
    <div class="query-results" data-testid="query-results">
      <p class="table-footer">
        <span data-testid="query-info">
          Rows {rows.length ? first + 1 : 0} to {first + rows.length}
          {total !== null ? ` of ${total}` : more ? ", more on the next page" : ""}
        </span>
        {page > 0 && (
          <button type="button" onClick={() => onPage(page - 1)}>
            Previous page
          </button>
        )}
        {more && (
          <button type="button" onClick={() => onPage(page + 1)}>
            Next page
          </button>
        )}
      </p>
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
          <tbody>
            {rows.map((row, index) => (
              <tr key={index}>
                {row.map((cell, column) => (
                  <td key={column}>{cellText(cell)}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </div>
  );
}
