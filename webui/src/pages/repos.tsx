// Repositories: list with search and paging, create, delete with typed-name confirmation.
import { useState } from "preact/hooks";
import { api, seg } from "../api";
import { ConfirmDialog } from "../components/confirm_dialog";
import { ErrorNote } from "../components/error_page";
import { formatTime } from "../components/format";
import { repoHref } from "../components/layout";
import { PagedTable } from "../components/paged_table";
import { Link } from "../components/router";

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
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<string | null>(null);
  const refresh = () => setGeneration((n) => n + 1);
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
        <button type="button" class="primary" onClick={() => setCreating(!creating)}>
          Create repository
        </button>
      </div>
      {creating && (
        <CreateRepository
          onCreated={() => {
            setCreating(false);
            refresh();
          }}
        />
      )}
      <PagedTable<Repository>
        testId="repositories"
        resetKey={`${search}|${generation}`}
        load={(after, signal) => api.page<Repository>("/repositories", { search }, after, PAGE, signal)}
        rowKey={(repo) => repo.id}
        empty={search ? "No repository matches." : "No repositories yet."}
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

function CreateRepository({ onCreated }: { onCreated: () => void }) {
  const [name, setName] = useState("");
  const [namespace, setNamespace] = useState("");
  const [branch, setBranch] = useState("main");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await api.post("/repositories", { name: name.trim(), storage_namespace: namespace.trim(), default_branch: branch.trim() });
      onCreated();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card create-repo" onSubmit={(event) => void submit(event)} data-testid="create-repository">
      <label>
        Name
        <input name="name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <label>
        Storage namespace
        <input name="storage_namespace" required placeholder="local://bucket/path" value={namespace} onInput={(e) => setNamespace(e.currentTarget.value)} />
      </label>
      <label>
        Default branch
        <input name="default_branch" required value={branch} onInput={(e) => setBranch(e.currentTarget.value)} />
      </label>
      <ErrorNote error={error} />
      <button type="submit" class="primary" disabled={busy}>
        Create
      </button>
    </form>
  );
}
