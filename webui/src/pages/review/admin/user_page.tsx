// One user: the groups they belong to (add, remove), the policies attached to them directly
// (attach, detach), their credentials and their web sessions.
import { ErrorNote } from "../../../components/error_page";
import { formatTime } from "../../../components/format";
import { useAsync } from "../../../components/use_async";
import { AdminFrame } from "./admin_frame";
import { CredentialsPanel } from "./credentials";
import { type Group, iamApi } from "./iam_api";
import { AttachedPolicies, KEPT_MEMBER, KEPT_USER_POLICY, RelatedTable, usePageAction } from "./related_table";
import { SessionsPanel } from "./sessions_panel";

export function UserPage({ userId }: { userId: string }) {
  return (
    <AdminFrame section="users" probe={(signal) => iamApi.getUser(userId, signal)} probeKey={userId}>
      <UserDetails userId={userId} />
    </AdminFrame>
  );
}

function UserDetails({ userId }: { userId: string }) {
  const user = useAsync((signal) => iamApi.getUser(userId, signal), [userId]);
  const { error, run } = usePageAction();
  return (
    <div class="user-page" data-testid="user-page">
      <h2>
        User <span data-testid="user-id">{userId}</span>
      </h2>
      {user.data && <p class="hint">Created {formatTime(user.data.creation_date)}</p>}
      <ErrorNote error={error} />
      <RelatedTable<Group>
        heading="Groups"
        ownerId={userId}
        add={{
          testId: "add-to-group",
          label: "Group",
          search: (prefix, signal) => iamApi.groups("", signal, prefix),
          button: "Add to group",
          action: (groupId) => iamApi.addMember(groupId, userId),
        }}
        testId="user-groups"
        load={(after, signal) => iamApi.userGroups(userId, after, signal)}
        section="groups"
        column="Group"
        empty="In no group."
        remove={{
          testId: "leave-group",
          label: "Remove from group",
          action: (groupId) => iamApi.removeMember(groupId, userId),
        }}
        keptWhy={KEPT_MEMBER}
        run={run}
      />
      <AttachedPolicies
        heading="Policies attached to the user"
        ownerId={userId}
        formTestId="attach-user-policy"
        testId="user-policies"
        load={(after, signal) => iamApi.userPolicies(userId, after, signal)}
        attach={(policyId) => iamApi.attachToUser(userId, policyId)}
        detach={(policyId) => iamApi.detachFromUser(userId, policyId)}
        keptWhy={KEPT_USER_POLICY}
        run={run}
      />
      <CredentialsPanel userId={userId} />
      <SessionsPanel userId={userId} />
    </div>
  );
}
