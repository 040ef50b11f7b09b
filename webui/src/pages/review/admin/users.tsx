// Users: list (paged), create, delete with confirmation; each links to its page.
import { useState } from "preact/hooks";
import { ConfirmDialog } from "../../../components/confirm_dialog";
import { formatTime } from "../../../components/format";
import { PagedTable } from "../../../components/paged_table";
import { Link } from "../../../components/router";
import { AdminFrame, adminHref, InlineForm } from "./admin_frame";
import { iamApi, type User } from "./iam_api";

export function UsersPage() {
  const [version, setVersion] = useState(0);
  const [deleting, setDeleting] = useState<string | null>(null);
  return (
    <AdminFrame section="users" probe={(signal) => iamApi.users("", signal)} probeKey="users">
      <h2>Users</h2>
      <InlineForm
        testId="create-user"
        fields={[{ name: "user_id", label: "New user ID" }]}
        button="Create user"
        onSubmit={async ({ user_id }) => {
          await iamApi.createUser(user_id);
          setVersion((n) => n + 1);
        }}
      />
      <PagedTable<User>
        testId="users-table"
        resetKey={String(version)}
        load={(after, signal) => iamApi.users(after, signal)}
        rowKey={(user) => user.id}
        empty="No users."
        columns={[
          { title: "User", cell: (user) => <Link href={adminHref("users", user.id)}>{user.id}</Link> },
          { title: "Created", cell: (user) => formatTime(user.creation_date) },
          {
            title: "",
            cell: (user) => (
              <button type="button" class="danger" onClick={() => setDeleting(user.id)} data-testid="delete-user">
                Delete
              </button>
            ),
          },
        ]}
      />
      {deleting !== null && (
        <ConfirmDialog
          title={`Delete user ${deleting}?`}
          confirmLabel="Delete user"
          onConfirm={async () => {
            await iamApi.deleteUser(deleting);
            setVersion((n) => n + 1);
          }}
          onClose={() => setDeleting(null)}
        >
          <p>Their credentials stop working at once.</p>
        </ConfirmDialog>
      )}
    </AdminFrame>
  );
}
