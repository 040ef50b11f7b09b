// Users: people (list, create, delete with confirmation) and, apart from them, Silt's own
// service accounts (svc-*), which the stack needs and nobody signs in as: listed read-only.
import { formatTime } from "../../../components/format";
import { PagedTable } from "../../../components/paged_table";
import { Link } from "../../../components/router";
import { AdminFrame, adminHref } from "./admin_frame";
import { iamApi, isServiceUser, SERVICE_PREFIX, type User } from "./iam_api";
import { PrincipalList } from "./principal_list";

export function UsersPage() {
  return (
    <AdminFrame section="users" probe={(signal) => iamApi.users("", signal)} probeKey="users">
      <h2>People</h2>
      <PrincipalList<User>
        kind="user"
        createFields={[{ name: "user_id", label: "New user ID" }]}
        create={({ user_id }) => iamApi.createUser(user_id)}
        load={async (after, signal) => {
          // Ids sort, so the services are one run of the listing: a page may come back short.
          const page = await iamApi.users(after, signal);
          return { ...page, results: page.results.filter((user) => !isServiceUser(user.id)) };
        }}
        columns={[]}
        remove={(userId) => iamApi.deleteUser(userId)}
        removeNote="Their credentials stop working at once."
      />
      <h2>Service accounts</h2>
      <p class="hint">
        Silt's own services call each other as these users ({SERVICE_PREFIX}…). Their rights come from the Services group and
        setup; change them only to rotate a key.
      </p>
      <PagedTable<User>
        testId="services-table"
        resetKey="services"
        load={(after, signal) => iamApi.users(after, signal, SERVICE_PREFIX)}
        rowKey={(user) => user.id}
        empty="No service accounts."
        columns={[
          { title: "Service account", cell: (user) => <Link href={adminHref("users", user.id)}>{user.id}</Link> },
          { title: "Created", cell: (user) => formatTime(user.creation_date) },
        ]}
      />
    </AdminFrame>
  );
}
