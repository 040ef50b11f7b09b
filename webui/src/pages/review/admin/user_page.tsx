// One user: the groups they belong to (add, remove), the policies attached to them directly
// (attach, detach) and their credentials.
import { useState } from "preact/hooks";
import { ErrorNote } from "../../../components/error_page";
import { formatTime } from "../../../components/format";
import { PagedTable } from "../../../components/paged_table";
import { Link } from "../../../components/router";
import { useAsync } from "../../../components/use_async";
import { AdminFrame, adminHref, InlineForm } from "./admin_frame";
import { CredentialsPanel } from "./credentials";
import { type Group, iamApi, type Policy } from "./iam_api";

export function UserPage({ userId }: { userId: string }) {
  return (
    <AdminFrame section="users" probe={(signal) => iamApi.getUser(userId, signal)} probeKey={userId}>
      <UserDetails userId={userId} />
    </AdminFrame>
  );
}

function UserDetails({ userId }: { userId: string }) {
  const user = useAsync((signal) => iamApi.getUser(userId, signal), [userId]);
  const [groupsVersion, setGroupsVersion] = useState(0);
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
    <div class="user-page" data-testid="user-page">
      <h2>
        User <span data-testid="user-id">{userId}</span>
      </h2>
      {user.data && <p class="hint">Created {formatTime(user.data.creation_date)}</p>}
      <ErrorNote error={error} />
      <h3>Groups</h3>
      <InlineForm
        testId="add-to-group"
        fields={[{ name: "group_id", label: "Group" }]}
        button="Add to group"
        onSubmit={async ({ group_id }) => {
          await iamApi.addMember(group_id, userId);
          setGroupsVersion((n) => n + 1);
        }}
      />
      <PagedTable<Group>
        testId="user-groups"
        resetKey={`${userId}/${groupsVersion}`}
        load={(after, signal) => iamApi.userGroups(userId, after, signal)}
        rowKey={(g) => g.id}
        empty="In no group."
        columns={[
          { title: "Group", cell: (g) => <Link href={adminHref("groups", g.id)}>{g.id}</Link> },
          {
            title: "",
            cell: (g) => (
              <button
                type="button"
                onClick={() => run(() => iamApi.removeMember(g.id, userId), () => setGroupsVersion((n) => n + 1))}
                data-testid="leave-group"
              >
                Remove from group
              </button>
            ),
          },
        ]}
      />
      <h3>Policies attached to the user</h3>
      <InlineForm
        testId="attach-user-policy"
        fields={[{ name: "policy_id", label: "Policy" }]}
        button="Attach policy"
        onSubmit={async ({ policy_id }) => {
          await iamApi.attachToUser(userId, policy_id);
          setPoliciesVersion((n) => n + 1);
        }}
      />
      <PoliciesTable
        testId="user-policies"
        resetKey={`${userId}/${policiesVersion}`}
        load={(after, signal) => iamApi.userPolicies(userId, after, signal)}
        onDetach={(policyId) => run(() => iamApi.detachFromUser(userId, policyId), () => setPoliciesVersion((n) => n + 1))}
      />
      <CredentialsPanel userId={userId} />
    </div>
  );
}

/** Attached policies with a detach control (users and groups alike). */
export function PoliciesTable(props: {
  testId: string;
  resetKey: string;
  load: (after: string, signal: AbortSignal) => ReturnType<typeof iamApi.policies>;
  onDetach: (policyId: string) => void;
}) {
  return (
    <PagedTable<Policy>
      testId={props.testId}
      resetKey={props.resetKey}
      load={props.load}
      rowKey={(p) => p.id}
      empty="No policies attached."
      columns={[
        { title: "Policy", cell: (p) => <Link href={adminHref("policies", p.id)}>{p.id}</Link> },
        {
          title: "",
          cell: (p) => (
            <button type="button" onClick={() => props.onDetach(p.id)} data-testid="detach-policy">
              Detach
            </button>
          ),
        },
      ]}
    />
  );
}
