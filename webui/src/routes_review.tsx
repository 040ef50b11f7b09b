// Routes of the review pages (pull requests, settings, administration).
import type { RouteDef } from "./components/routes";
import { GroupPage, GroupsPage } from "./pages/review/admin/groups";
import { NewPolicyPage, PoliciesPage, PolicyPage } from "./pages/review/admin/policies";
import { UserPage } from "./pages/review/admin/user_page";
import { UsersPage } from "./pages/review/admin/users";
import { CreatePullPage } from "./pages/review/pull_create";
import { PullPage } from "./pages/review/pull_page";
import { PullsPage } from "./pages/review/pulls_list";
import { SettingsPage } from "./pages/review/settings_page";
import "./pages/review/review.css";

export const reviewRoutes: RouteDef[] = [
  {
    path: "/repositories/:repo/pulls",
    tab: "pulls",
    title: "Pull requests",
    render: ({ params, query }) => <PullsPage repo={params.repo} status={query.get("status") ?? "open"} />,
  },
  {
    path: "/repositories/:repo/pulls/new",
    tab: "pulls",
    title: "New pull request",
    render: ({ params, query }) => (
      <CreatePullPage repo={params.repo} source={query.get("source") ?? ""} destination={query.get("destination") ?? ""} />
    ),
  },
  {
    path: "/repositories/:repo/pulls/:id",
    tab: "pulls",
    title: "Pull request",
    render: ({ params }) => <PullPage repo={params.repo} id={params.id} />,
  },
  {
    path: "/repositories/:repo/settings",
    tab: "settings",
    title: "Settings",
    render: ({ params }) => <SettingsPage repo={params.repo} />,
  },
  { path: "/admin", title: "Users", render: () => <UsersPage /> },
  { path: "/admin/users", title: "Users", render: () => <UsersPage /> },
  { path: "/admin/users/:user", title: "User", render: ({ params }) => <UserPage userId={params.user} /> },
  { path: "/admin/groups", title: "Groups", render: () => <GroupsPage /> },
  { path: "/admin/groups/:group", title: "Group", render: ({ params }) => <GroupPage groupId={params.group} /> },
  { path: "/admin/policies", title: "Policies", render: () => <PoliciesPage /> },
  { path: "/admin/policies/:policy", title: "Policy", render: ({ params }) => <PolicyPage policyId={params.policy} /> },
  { path: "/admin/new-policy", title: "New policy", render: ({ query }) => <NewPolicyPage from={query.get("from") ?? ""} /> },
];
