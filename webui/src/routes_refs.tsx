// Routes of the refs pages: uncommitted changes, history and a commit's page, branches, tags,
// compare and merge, a path's history, and a branch's live feed.
import type { RouteDef } from "./components/routes";
import "./pages/refs/refs.css";
import { BranchesPage } from "./pages/refs/branches";
import { ChangesPage } from "./pages/refs/changes";
import { CommitPage } from "./pages/refs/commit";
import { ComparePage } from "./pages/refs/compare";
import { HistoryPage } from "./pages/refs/history";
import { LivePage } from "./pages/refs/live";
import { ObjectHistoryPage } from "./pages/refs/object_history";
import { TagsPage } from "./pages/refs/tags";

export const refsRoutes: RouteDef[] = [
  {
    path: "/repositories/:repo/changes",
    tab: "changes",
    title: "Changes",
    render: ({ params, query }) => <ChangesPage repo={params.repo} query={query} />,
  },
  {
    path: "/repositories/:repo/commits",
    tab: "commits",
    title: "History",
    render: ({ params, query }) => <HistoryPage repo={params.repo} query={query} />,
  },
  {
    path: "/repositories/:repo/commits/:commit",
    tab: "commits",
    title: "Commit",
    render: ({ params }) => <CommitPage repo={params.repo} commitId={params.commit} />,
  },
  { path: "/repositories/:repo/branches", tab: "branches", title: "Branches", render: ({ params }) => <BranchesPage repo={params.repo} /> },
  { path: "/repositories/:repo/tags", tab: "tags", title: "Tags", render: ({ params }) => <TagsPage repo={params.repo} /> },
  {
    path: "/repositories/:repo/compare",
    tab: "compare",
    title: "Compare",
    render: ({ params, query }) => <ComparePage repo={params.repo} query={query} />,
  },
  {
    path: "/repositories/:repo/object-history",
    tab: "objects",
    title: "Object history",
    render: ({ params, query }) => <ObjectHistoryPage repo={params.repo} query={query} />,
  },
  {
    path: "/repositories/:repo/live",
    tab: "live",
    title: "Live feed",
    render: ({ params, query }) => <LivePage repo={params.repo} query={query} />,
  },
];
