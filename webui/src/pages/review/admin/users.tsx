// Users: list (paged), create, delete with confirmation; each links to its page.
import { AdminFrame } from "./admin_frame";
import { iamApi, type User } from "./iam_api";
import { PrincipalList } from "./principal_list";

export function UsersPage() {
  return (
    <AdminFrame section="users" probe={(signal) => iamApi.users("", signal)} probeKey="users">
      <h2>Users</h2>
      <PrincipalList<User>
        kind="user"
        createFields={[{ name: "user_id", label: "New user ID" }]}
        create={({ user_id }) => iamApi.createUser(user_id)}
        load={(after, signal) => iamApi.users(after, signal)}
        columns={[]}
        remove={(userId) => iamApi.deleteUser(userId)}
        removeNote="Their credentials stop working at once."
      />
    </AdminFrame>
  );
}
