// The list of users or of groups: a form that creates one, a paged table of links to them,
// and a delete control that asks first.
import { useState } from "preact/hooks";
import type { Page } from "../../../api";
import { ConfirmDialog } from "../../../components/confirm_dialog";
import { formatTime } from "../../../components/format";
import { type Column, PagedTable } from "../../../components/paged_table";
import { Link } from "../../../components/router";
import { adminHref, type Field, InlineForm } from "./admin_frame";

export function PrincipalList<T extends { id: string; creation_date: number }>(props: {
  /** Names the page's labels and test ids: "Create user", users-table, delete-user. */
  kind: "user" | "group";
  createFields: Field[];
  create: (values: Record<string, string>) => Promise<unknown>;
  load: (after: string, signal: AbortSignal) => Promise<Page<T>>;
  /** Shown between the name and the creation time. */
  columns: Column<T>[];
  remove: (id: string) => Promise<unknown>;
  /** What deleting one does, said in the confirmation. */
  removeNote: string;
}) {
  const { kind } = props;
  const title = kind === "user" ? "User" : "Group";
  const [version, setVersion] = useState(0);
  const [deleting, setDeleting] = useState<string | null>(null);
  const changed = () => setVersion((n) => n + 1);
  return (
    <>
      <InlineForm
        testId={`create-${kind}`}
        fields={props.createFields}
        button={`Create ${kind}`}
        onSubmit={async (values) => {
          await props.create(values);
          changed();
        }}
      />
      <PagedTable<T>
        testId={`${kind}s-table`}
        resetKey={String(version)}
        load={props.load}
        rowKey={(row) => row.id}
        empty={`No ${kind}s.`}
        columns={[
          { title, cell: (row) => <Link href={adminHref(`${kind}s`, row.id)}>{row.id}</Link> },
          ...props.columns,
          { title: "Created", cell: (row) => formatTime(row.creation_date) },
          {
            title: "",
            cell: (row) => (
              <button type="button" class="danger" onClick={() => setDeleting(row.id)} data-testid={`delete-${kind}`}>
                Delete
              </button>
            ),
          },
        ]}
      />
      {deleting !== null && (
        <ConfirmDialog
          title={`Delete ${kind} ${deleting}?`}
          confirmLabel={`Delete ${kind}`}
          onConfirm={async () => {
            await props.remove(deleting);
            changed();
          }}
          onClose={() => setDeleting(null)}
        >
          <p>{props.removeNote}</p>
        </ConfirmDialog>
      )}
    </>
  );
}
