// The Iceberg tables a comparison changes (the API's table-level diff): per table, snapshots
// and rows added and deleted, and its schema changes. Shown only when some table changed.
import { useState } from "preact/hooks";
import { type Pagination, api, seg } from "../../api";
import { ErrorNote } from "../../components/error_page";
import { useAsync } from "../../components/use_async";
import { repoPath } from "./model";

/** Tables asked for a page (the API's most). */
const TABLES_PAGE = 100;

export interface SchemaChange {
  change: "added" | "removed" | "renamed" | "type_changed";
  field_id: number;
  name: string;
  type: string;
  previous_name?: string;
  previous_type?: string;
}

export interface TableChange {
  table: string;
  type: "added" | "removed" | "changed";
  snapshots_added_count: number;
  snapshots_removed_count: number;
  rows_added: number;
  rows_deleted: number;
  schema_changes: SchemaChange[];
  errors?: string[];
}

interface TablesPage {
  pagination: Pagination;
  results: TableChange[];
}

/** One schema change as a phrase: "added score (double)", "renamed name → label". */
export function describeSchemaChange(change: SchemaChange): string {
  switch (change.change) {
    case "added":
      return `added ${change.name} (${change.type})`;
    case "removed":
      return `removed ${change.name} (${change.type})`;
    case "renamed":
      return `renamed ${change.previous_name ?? "?"} → ${change.name}`;
    case "type_changed":
      return `${change.name}: ${change.previous_type ?? "?"} → ${change.type}`;
  }
}

export function TableChanges(props: { repo: string; base: string; compare: string; resetKey: string }) {
  const [after, setAfter] = useState("");
  const path = `${repoPath(props.repo)}/refs/${seg(props.base)}/diff/${seg(props.compare)}/tables`;
  const page = useAsync(
    (signal) => api.get<TablesPage>(path, { amount: TABLES_PAGE, after, type: "three_dot" }, signal),
    [path, props.resetKey, after],
  );
  if (page.error) return <ErrorNote error={page.error} />;
  if (!page.data || (page.data.results.length === 0 && !after && !page.data.pagination.has_more)) return null;
  const { results, pagination } = page.data;
  return (
    <section class="table-changes" data-testid="table-changes">
      <h2>Iceberg tables</h2>
      <table class="listing">
        <thead>
          <tr>
            <th>Table</th>
            <th>Change</th>
            <th>Snapshots</th>
            <th>Rows</th>
            <th>Schema</th>
          </tr>
        </thead>
        <tbody>
          {results.map((table) => (
            <tr key={table.table} data-testid="table-change-row">
              <td>
                <code>{table.table}</code>
              </td>
              <td>{table.type}</td>
              <td>
                +{table.snapshots_added_count}
                {table.snapshots_removed_count > 0 && ` −${table.snapshots_removed_count}`}
              </td>
              <td>
                +{table.rows_added} −{table.rows_deleted}
              </td>
              <td>
                {table.schema_changes.length === 0 ? (
                  "—"
                ) : (
                  <ul class="schema-changes">
                    {table.schema_changes.map((change) => (
                      <li key={`${change.change}-${change.field_id}`}>{describeSchemaChange(change)}</li>
                    ))}
                  </ul>
                )}
                {table.errors?.map((error) => (
                  <p key={error} class="error-note">
                    {error}
                  </p>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {pagination.has_more && (
        <button type="button" onClick={() => setAfter(pagination.next_offset)}>
          Next tables
        </button>
      )}
    </section>
  );
}
