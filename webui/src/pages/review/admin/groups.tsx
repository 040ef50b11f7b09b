// Groups: list, create (id and description), delete (not Silt's own, badged "system"); and one
// group's page with its members and attached policies.
import { ErrorNote } from "../../../components/error_page";
import { useAsync } from "../../../components/use_async";
import { AdminFrame } from "./admin_frame";
import { type Group, iamApi, type User } from "./iam_api";
import { PrincipalList, SystemBadge } from "./principal_list";
import { AttachedPolicies, KEPT_GROUP_POLICY, KEPT_MEMBER, RelatedTable, usePageAction } from "./related_table";

export function GroupsPage() {
  return (
    <AdminFrame section="groups" probe={(signal) => iamApi.groups("", signal)} probeKey="groups">
      <h2>Groups</h2>
      <PrincipalList<Group>
        kind="group"
        createFields={[
          { name: "group_id", label: "New group ID" },
          { name: "description", label: "Description", optional: true },
        ]}
        create={({ group_id, description }) => iamApi.createGroup(group_id, description)}
        load={(after, signal) => iamApi.groups(after, signal)}
        columns={[{ title: "Description", cell: (g) => g.description ?? "" }]}
        remove={(groupId) => iamApi.deleteGroup(groupId)}
        removeNote="Its members lose the rights its policies gave them."
      />
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
  const { error, run } = usePageAction();
  return (
    <div class="group-page" data-testid="group-page">
      <h2>
        Group <span data-testid="group-id">{groupId}</span>
        {group.data?.system && <SystemBadge kind="group" />}
      </h2>
      {group.data?.description && <p class="description">{group.data.description}</p>}
      <ErrorNote error={error} />
      <RelatedTable<User>
        heading="Members"
        ownerId={groupId}
        add={{
          testId: "add-member",
          label: "User",
          search: (prefix, signal) => iamApi.users("", signal, prefix),
          button: "Add member",
          action: (userId) => iamApi.addMember(groupId, userId),
        }}
        testId="group-members"
        load={(after, signal) => iamApi.members(groupId, after, signal)}
        section="users"
        column="User"
        empty="No members."
        remove={{
          testId: "remove-member",
          label: "Remove",
          action: (userId) => iamApi.removeMember(groupId, userId),
        }}
        keptWhy={KEPT_MEMBER}
        run={run}
      />
      <AttachedPolicies
        heading="Policies attached to the group"
        ownerId={groupId}
        formTestId="attach-group-policy"
        testId="group-policies"
        load={(after, signal) => iamApi.groupPolicies(groupId, after, signal)}
        attach={(policyId) => iamApi.attachToGroup(groupId, policyId)}
        detach={(policyId) => iamApi.detachFromGroup(groupId, policyId)}
        keptWhy={KEPT_GROUP_POLICY}
        run={run}
      />
    </div>
  );
}
