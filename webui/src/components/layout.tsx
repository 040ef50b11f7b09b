// The page frame: a header with the user and logout, and for repository pages the repository
// name and its tabs.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { ConfirmDialog } from "./confirm_dialog";
import type { CurrentUser } from "../session";
import { Link, href } from "./router";
import type { RepoTab } from "./routes";
import { usePermissions } from "./user";

export const REPO_TABS: { tab: RepoTab; label: string }[] = [
  { tab: "objects", label: "Objects" },
  { tab: "changes", label: "Changes" },
  { tab: "commits", label: "History" },
  { tab: "branches", label: "Branches" },
  { tab: "tags", label: "Tags" },
  { tab: "compare", label: "Compare" },
  { tab: "pulls", label: "Pull requests" },
  { tab: "actions", label: "Actions" },
  { tab: "live", label: "Live feed" },
  { tab: "settings", label: "Settings" },
];

// Tabs that show one ref keep the ref the user is looking at.
const REF_TABS = new Set<RepoTab>(["objects", "changes", "commits", "live"]);

/** The URL of a repository page: a tab (a RepoTab), or another page below the repository ("object"). */
export function repoHref(repo: string, page: string, query: Record<string, string | undefined> = {}): string {
  return href(`/repositories/${encodeURIComponent(repo)}/${page}`, query);
}

export function Shell(props: {
  user: CurrentUser;
  onLogout: () => void;
  /** Ends every session of the user, this browser's and every other's. */
  onLogoutEverywhere: () => Promise<void>;
  children: ComponentChildren;
}) {
  const [asking, setAsking] = useState(false);
  // Offered only to who may use it: the administration pages start by listing users.
  const administer = usePermissions()?.administer ?? false;
  return (
    <div class="shell">
      <header class="topbar">
        <Link href={href("/")} class="brand">
          Silt
        </Link>
        <nav class="topnav">
          <Link href={href("/")}>Repositories</Link>
          {administer && <Link href={href("/admin")}>Administration</Link>}
        </nav>
        <span class="whoami" data-testid="whoami">
          {props.user.id}
        </span>
        <button type="button" class="logout" onClick={props.onLogout}>
          Log out
        </button>
        <button
          type="button"
          class="logout link"
          onClick={() => setAsking(true)}
          title="End your web sessions in every browser"
          data-testid="logout-everywhere"
        >
          Sign out everywhere
        </button>
      </header>
      <main class="content">{props.children}</main>
      {asking && (
        <ConfirmDialog
          title="Sign out everywhere?"
          confirmLabel="Sign out everywhere"
          onConfirm={props.onLogoutEverywhere}
          onClose={() => setAsking(false)}
        >
          <p>Every browser signed in as {props.user.id}, this one included, goes back to the sign-in page.</p>
        </ConfirmDialog>
      )}
    </div>
  );
}

export function RepoLayout(props: { repo: string; tab: RepoTab; query: URLSearchParams; children: ComponentChildren }) {
  const ref = props.query.get("ref") ?? undefined;
  return (
    <div class="repo">
      <h1 class="repo-title">
        <Link href={href("/")}>Repositories</Link> / <span data-testid="repo-name">{props.repo}</span>
      </h1>
      <nav class="tabs" aria-label="repository">
        {REPO_TABS.map(({ tab, label }) => (
          <Link
            key={tab}
            href={repoHref(props.repo, tab, REF_TABS.has(tab) ? { ref } : {})}
            class={tab === props.tab ? "tab active" : "tab"}
            aria-current={tab === props.tab ? "page" : undefined}
          >
            {label}
          </Link>
        ))}
      </nav>
      <section class="tab-body">{props.children}</section>
    </div>
  );
}
