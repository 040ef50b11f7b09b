// Routes of the data pages: one object's diff between two refs, and SQL over one object.
import type { RouteDef } from "./components/routes";
import "./pages/diff/diff.css";
import { ObjectDiff, rowMatch } from "./pages/diff/object_diff";
import { QueryPage } from "./pages/query/query_page";

export const dataRoutes: RouteDef[] = [
  {
    path: "/repositories/:repo/diff",
    tab: "compare",
    title: "Object diff",
    render: ({ params, query }) => (
      <ObjectDiff
        repo={params.repo}
        left={query.get("left") ?? ""}
        right={query.get("right") ?? ""}
        path={query.get("path") ?? ""}
        type={query.get("type") === "three_dot" ? "three_dot" : "two_dot"}
        keyColumn={query.get("key") ?? ""}
        match={rowMatch(query.get("match"))}
      />
    ),
  },
  {
    path: "/repositories/:repo/query",
    tab: "objects",
    title: "Query",
    render: ({ params, query }) => <QueryPage repo={params.repo} query={query} />,
  },
];
