// Routes of the Actions tab: a repository's action runs and one run with its hooks.
import type { RouteDef } from "./components/routes";
import "./pages/actions/actions.css";
import { RunPage } from "./pages/actions/run_page";
import { ActionsPage } from "./pages/actions/runs";

export const actionsRoutes: RouteDef[] = [
  {
    path: "/repositories/:repo/actions",
    tab: "actions",
    title: "Actions",
    render: ({ params, query }) => <ActionsPage repo={params.repo} query={query} />,
  },
  {
    path: "/repositories/:repo/actions/:run",
    tab: "actions",
    title: "Action run",
    render: ({ params }) => <RunPage repo={params.repo} runId={params.run} />,
  },
];
