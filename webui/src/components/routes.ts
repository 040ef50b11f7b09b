// The shape of a route table entry (routes_refs.tsx, routes_review.tsx and app.tsx's own).
import type { ComponentChildren } from "preact";
import type { CurrentUser } from "../session";
import type { Params } from "./router";

/** The repository tabs, in the order the layout shows them. */
export type RepoTab =
  | "objects"
  | "changes"
  | "commits"
  | "branches"
  | "tags"
  | "compare"
  | "pulls"
  | "actions"
  | "live"
  | "settings";

export interface RouteContext {
  /** `:name` segments of the pattern, URL-decoded. */
  params: Params;
  /** The page's query string (ref, path, cursor...). */
  query: URLSearchParams;
  user: CurrentUser;
}

export interface RouteDef {
  /** Pattern below /ui: "/repositories/:repo/changes". Matched segment by segment. */
  path: string;
  /** Set for pages of one repository (`:repo` in the pattern): the layout shows the repository
   * tabs with this one selected. Unset: a page of its own (administration, say). */
  tab?: RepoTab;
  /** The document title (the repository name is added by the layout). */
  title: string;
  render: (context: RouteContext) => ComponentChildren;
}
