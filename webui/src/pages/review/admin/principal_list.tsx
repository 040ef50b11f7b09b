// The list of users or of groups: a form that creates one, a paged table of links to them,
// and a delete control that asks first (none for Silt's own groups, badged "system").
import { useState } from "preact/hooks";
import type { Page } from "../../../api";
import { ConfirmDialog } from "../../../components/confirm_dialog";
import { formatTime } from "../../../components/format";
import { type Column, PagedTable } from "../../../components/paged_table";
import { Link } from "../../../components/router";
import { adminHref, type Field, InlineForm } from "./admin_frame";

/** Marks one of Silt's own groups or policies, which its services or preset roles need. */
export function SystemBadge({ kind }: { kind: "group" | "policy" }) {
  return (
    <span class="system-badge" data-testid="system-badge" title={`One of Silt's own ${kind === "group" ? "groups" : "policies"}: setup writes it again at every start, so it cannot be deleted`}>
      system
    </span>
  );
}

export function PrincipalList<T extends { id: string; creation_date: number; system?: boolean }>(props: {
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
          {
            title,
            cell: (row) => (
              <>
                <Link href={adminHref(`${kind}s`, row.id)}>{row.id}</Link>
                {row.system && <SystemBadge kind="group" />}
              </>
            ),
          },
          ...props.columns,
          { title: "Created", cell: (row) => formatTime(row.creation_date) },
          {
            title: "",
            cell: (row) =>
              row.system ? null : (
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
