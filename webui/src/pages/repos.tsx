// Repositories: list with search and paging, create (repos_create.tsx; a sample repository
// offered while the list is empty), delete with typed-name confirmation.
import { useState } from "preact/hooks";
import { api, seg } from "../api";
import { ConfirmDialog } from "../components/confirm_dialog";
import { formatTime } from "../components/format";
import { repoHref } from "../components/layout";
import { PagedTable } from "../components/paged_table";
import { Link, navigate } from "../components/router";
import { usePermissions } from "../components/user";
import { CreateRepository, FirstRun, SAMPLE_NAME } from "./repos_create";

const PAGE = 100;

export interface Repository {
  id: string;
  creation_date: number;
  default_branch: string;
  storage_namespace: string;
}

export function ReposPage() {
  const [search, setSearch] = useState("");
  const [generation, setGeneration] = useState(0);
  const [creating, setCreating] = useState<"plain" | "sample" | null>(null);
  const [deleting, setDeleting] = useState<string | null>(null);
  const refresh = () => setGeneration((n) => n + 1);
  const permissions = usePermissions();
  // An empty list is a first run only for who may create repositories; for anyone else it is
  // the repositories they have been given access to, none (the API lists only those).
  const none = search ? (
    "No repository matches."
  ) : creating ? (
    "No repositories yet."
  ) : permissions === undefined ? (
    "No repositories to show."
  ) : permissions.create_repository ? (
    <FirstRun onSample={() => setCreating("sample")} />
  ) : (
    <NoAccess />
  );
  return (
    <section class="repos">
      <div class="toolbar">
        <h1>Repositories</h1>
        <input
          type="search"
          placeholder="Search repositories"
          aria-label="search repositories"
          value={search}
          onInput={(event) => setSearch(event.currentTarget.value)}
        />
        <button type="button" class="primary" onClick={() => setCreating(creating ? null : "plain")}>
          Create repository
        </button>
      </div>
      {creating && (
        <CreateRepository
          key={creating}
          sample={creating === "sample"}
          initialName={creating === "sample" ? SAMPLE_NAME : ""}
          onCreated={(repo) => {
            setCreating(null);
            if (creating === "sample") navigate(repoHref(repo.id, "objects", { ref: repo.default_branch }));
            else refresh();
          }}
        />
      )}
      <PagedTable<Repository>
        testId="repositories"
        resetKey={`${search}|${generation}`}
        load={(after, signal) => api.page<Repository>("/repositories", { search }, after, PAGE, signal)}
        rowKey={(repo) => repo.id}
        empty={none}
        columns={[
          { title: "Name", cell: (repo) => <Link href={repoHref(repo.id, "objects", { ref: repo.default_branch })}>{repo.id}</Link> },
          { title: "Default branch", cell: (repo) => repo.default_branch },
          { title: "Storage namespace", cell: (repo) => <code>{repo.storage_namespace}</code> },
          { title: "Created", cell: (repo) => formatTime(repo.creation_date) },
          {
            title: "",
            className: "row-actions",
            cell: (repo) => (
              <button type="button" class="danger" onClick={() => setDeleting(repo.id)} aria-label={`delete ${repo.id}`}>
                Delete
              </button>
            ),
          },
        ]}
      />
      {deleting !== null && (
        <ConfirmDialog
          title={`Delete repository ${deleting}?`}
          confirmLabel="Delete repository"
          typeToConfirm={deleting}
          onConfirm={async () => {
            await api.del(`/repositories/${seg(deleting)}`);
            refresh();
          }}
          onClose={() => setDeleting(null)}
        >
          <p>Its branches, tags and commits go away. This cannot be undone.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}

/** The empty list of a user who may not create repositories and has been given access to none. */
function NoAccess() {
  return (
    <div class="first-run" data-testid="no-access">
      <p>
        <strong>You have no access to any repository.</strong> Repositories appear here once an administrator gives you
        access to them (a policy allowing ReadRepo, attached to you or a group of yours); you may not create repositories
        yourself.
      </p>
    </div>
  );
}
