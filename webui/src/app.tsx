// The app: finds who is signed in, then renders the route matching the URL inside the shell.
// Route tables: this file's own (repositories, objects) plus routes_refs.tsx, routes_review.tsx,
// routes_actions.tsx and routes_data.tsx; the first pattern that matches wins.
import { useEffect, useState } from "preact/hooks";
import { onUnauthenticated } from "./api";
import { ErrorPage, Loading } from "./components/error_page";
import { RepoLayout, Shell } from "./components/layout";
import { href, match, navigate, safeNext, useLocation } from "./components/router";
import type { RouteDef } from "./components/routes";
import { UserContext } from "./components/user";
import { ApiError } from "./api";
import { LoginPage } from "./pages/login";
import { ObjectPage, ObjectsPage } from "./pages/objects";
import { ReposPage } from "./pages/repos";
import { actionsRoutes } from "./routes_actions";
import { dataRoutes } from "./routes_data";
import { refsRoutes } from "./routes_refs";
import { reviewRoutes } from "./routes_review";
import { type CurrentUser, logout, logoutEverywhere, whoami } from "./session";

const baseRoutes: RouteDef[] = [
  { path: "/", title: "Repositories", render: () => <ReposPage /> },
  { path: "/repositories", title: "Repositories", render: () => <ReposPage /> },
  {
    path: "/repositories/:repo",
    tab: "objects",
    title: "Objects",
    render: ({ params, query }) => <ObjectsPage repo={params.repo} query={query} />,
  },
  {
    path: "/repositories/:repo/objects",
    tab: "objects",
    title: "Objects",
    render: ({ params, query }) => <ObjectsPage repo={params.repo} query={query} />,
  },
  {
    path: "/repositories/:repo/object",
    tab: "objects",
    title: "Object",
    render: ({ params, query }) => <ObjectPage repo={params.repo} query={query} />,
  },
];

const ROUTES: RouteDef[] = [...baseRoutes, ...refsRoutes, ...reviewRoutes, ...actionsRoutes, ...dataRoutes];

type SessionState = { kind: "checking" } | { kind: "signed-out" } | { kind: "signed-in"; user: CurrentUser } | { kind: "failed"; error: unknown };

export function App() {
  const location = useLocation();
  const [session, setSession] = useState<SessionState>({ kind: "checking" });

  useEffect(() => {
    whoami().then(
      (user) => setSession(user ? { kind: "signed-in", user } : { kind: "signed-out" }),
      (error: unknown) => setSession({ kind: "failed", error }),
    );
    return onUnauthenticated(() => setSession({ kind: "signed-out" }));
  }, []);

  if (session.kind === "checking") return <Loading />;
  if (session.kind === "failed") return <ErrorPage error={session.error} />;
  if (session.kind === "signed-out") {
    return (
      <LoginPage
        onLogin={(user) => {
          setSession({ kind: "signed-in", user });
          if (location.path === "/login") navigate(safeNext(location.query.get("next")), true);
        }}
      />
    );
  }
  const signOut = () => {
    // Signed out here whatever the server answers: a failed logout leaves nothing to retry.
    void logout()
      .catch(() => undefined)
      .finally(() => {
        setSession({ kind: "signed-out" });
        navigate(href("/login"), true);
      });
  };
  const signOutEverywhere = async () => {
    // Unlike a logout, a failure matters (other browsers stay signed in): it is thrown to the
    // dialog that asked, which shows it.
    await logoutEverywhere(session.user.id);
    setSession({ kind: "signed-out" });
    navigate(href("/login"), true);
  };
  return (
    <UserContext.Provider value={session.user}>
      <Shell user={session.user} onLogout={signOut} onLogoutEverywhere={signOutEverywhere}>
        <Routed path={location.path} query={location.query} user={session.user} />
      </Shell>
    </UserContext.Provider>
  );
}

function Routed({ path, query, user }: { path: string; query: URLSearchParams; user: CurrentUser }) {
  if (path === "/login") {
    navigate(safeNext(query.get("next")), true);
    return null;
  }
  for (const route of ROUTES) {
    const params = match(route.path, path);
    if (!params) continue;
    const title = params.repo ? `${route.title} · ${params.repo} · Silt` : `${route.title} · Silt`;
    if (document.title !== title) document.title = title;
    const page = route.render({ params, query, user });
    if (route.tab && params.repo !== undefined) {
      return (
        <RepoLayout repo={params.repo} tab={route.tab} query={query}>
          {page}
        </RepoLayout>
      );
    }
    return <>{page}</>;
  }
  return <ErrorPage error={new ApiError(404, `no page at ${path}`)} />;
}
