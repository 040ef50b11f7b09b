// Groups: list, create (id and description), delete; and one group's page with its members and
// attached policies.
import { useState } from "preact/hooks";
import { ConfirmDialog } from "../../../components/confirm_dialog";
import { ErrorNote } from "../../../components/error_page";
import { formatTime } from "../../../components/format";
import { PagedTable } from "../../../components/paged_table";
import { Link } from "../../../components/router";
import { useAsync } from "../../../components/use_async";
import { AdminFrame, adminHref, InlineForm } from "./admin_frame";
import { type Group, iamApi, type User } from "./iam_api";
import { PoliciesTable } from "./user_page";

export function GroupsPage() {
  const [version, setVersion] = useState(0);
  const [deleting, setDeleting] = useState<string | null>(null);
  return (
    <AdminFrame section="groups" probe={(signal) => iamApi.groups("", signal)} probeKey="groups">
      <h2>Groups</h2>
      <InlineForm
        testId="create-group"
        fields={[
          { name: "group_id", label: "New group ID" },
          { name: "description", label: "Description", optional: true },
        ]}
        button="Create group"
        onSubmit={async ({ group_id, description }) => {
          await iamApi.createGroup(group_id, description);
          setVersion((n) => n + 1);
        }}
      />
      <PagedTable<Group>
        testId="groups-table"
        resetKey={String(version)}
        load={(after, signal) => iamApi.groups(after, signal)}
        rowKey={(g) => g.id}
        empty="No groups."
        columns={[
          { title: "Group", cell: (g) => <Link href={adminHref("groups", g.id)}>{g.id}</Link> },
          { title: "Description", cell: (g) => g.description ?? "" },
          { title: "Created", cell: (g) => formatTime(g.creation_date) },
          {
            title: "",
            cell: (g) => (
              <button type="button" class="danger" onClick={() => setDeleting(g.id)} data-testid="delete-group">
                Delete
              </button>
            ),
          },
        ]}
      />
      {deleting !== null && (
        <ConfirmDialog
          title={`Delete group ${deleting}?`}
          confirmLabel="Delete group"
          onConfirm={async () => {
            await iamApi.deleteGroup(deleting);
            setVersion((n) => n + 1);
          }}
          onClose={() => setDeleting(null)}
        >
          <p>Its members lose the rights its policies gave them.</p>
        </ConfirmDialog>
      )}
    </AdminFrame>
  );
}

export function GroupPage({ groupId }: { groupId: string }) {
  return (
    <AdminFrame section="groups" probe={(signal) => iamApi.getGroup(groupId, signal)} probeKey={groupId}>
      <GroupDetails groupId={groupId} />
    </AdminFrame>
  );
}

function GroupDetails({ groupId }: { groupId: string }) {
  const group = useAsync((signal) => iamApi.getGroup(groupId, signal), [groupId]);
  const [membersVersion, setMembersVersion] = useState(0);
  const [policiesVersion, setPoliciesVersion] = useState(0);
  const [error, setError] = useState<unknown>(undefined);
  const run = async (action: () => Promise<unknown>, after: () => void) => {
    setError(undefined);
    try {
      await action();
      after();
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <div class="group-page" data-testid="group-page">
      <h2>
        Group <span data-testid="group-id">{groupId}</span>
      </h2>
      {group.data?.description && <p class="description">{group.data.description}</p>}
      <ErrorNote error={error} />
      <h3>Members</h3>
      <InlineForm
        testId="add-member"
        fields={[{ name: "user_id", label: "User" }]}
        button="Add member"
        onSubmit={async ({ user_id }) => {
          await iamApi.addMember(groupId, user_id);
          setMembersVersion((n) => n + 1);
        }}
      />
      <PagedTable<User>
        testId="group-members"
        resetKey={`${groupId}/${membersVersion}`}
        load={(after, signal) => iamApi.members(groupId, after, signal)}
        rowKey={(u) => u.id}
        empty="No members."
        columns={[
          { title: "User", cell: (u) => <Link href={adminHref("users", u.id)}>{u.id}</Link> },
          {
            title: "",
            cell: (u) => (
              <button type="button" onClick={() => run(() => iamApi.removeMember(groupId, u.id), () => setMembersVersion((n) => n + 1))} data-testid="remove-member">
                Remove
              </button>
            ),
          },
        ]}
      />
      <h3>Policies attached to the group</h3>
      <InlineForm
        testId="attach-group-policy"
        fields={[{ name: "policy_id", label: "Policy" }]}
        button="Attach policy"
        onSubmit={async ({ policy_id }) => {
          await iamApi.attachToGroup(groupId, policy_id);
          setPoliciesVersion((n) => n + 1);
        }}
      />
      <PoliciesTable
        testId="group-policies"
        resetKey={`${groupId}/${policiesVersion}`}
        load={(after, signal) => iamApi.groupPolicies(groupId, after, signal)}
        onDetach={(policyId) => run(() => iamApi.detachFromGroup(groupId, policyId), () => setPoliciesVersion((n) => n + 1))}
      />
    </div>
  );
}
