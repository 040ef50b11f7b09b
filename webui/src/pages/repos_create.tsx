// Creating a repository: the form (name, storage namespace, default branch, sample data) and
// the first-run offer shown where the list is empty. The namespace may be left out when the
// server places repositories itself (GET /config: storage_config.default_namespace_prefix),
// as lakeFS's clients do; the sample is the API's RepositoryCreation.sample_data.
import { useEffect, useState } from "preact/hooks";
import { api } from "../api";
import { ErrorNote } from "../components/error_page";
import { useAsync } from "../components/use_async";

interface Config {
  storage_config?: { default_namespace_prefix?: string | null } | null;
}

export interface Created {
  id: string;
  default_branch: string;
}

export const SAMPLE_NAME = "sample-repo";
// Repository names are at most 63 characters (S3 bucket names, lakeFS).
const MAX_NAME = 63;
const MAX_NAMESPACE = 1024;
const MAX_BRANCH = 256;

/** Where an unnamed namespace goes, null when the server needs one named, undefined until known. */
function useDefaultPrefix(): string | null | undefined {
  const config = useAsync((signal) => api.get<Config>("/config", undefined, signal), []);
  if (config.error) return null;
  if (config.data === undefined) return undefined;
  return config.data.storage_config?.default_namespace_prefix ?? null;
}

/** Seconds since `since` (ms), ticking once a second while `since` is set. */
function useElapsed(since: number | null): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (since === null) return undefined;
    setNow(Date.now());
    const timer = window.setInterval(() => setNow(Date.now()), 1000);
    return () => window.clearInterval(timer);
  }, [since]);
  return since === null ? 0 : Math.max(0, Math.floor((now - since) / 1000));
}

/** What the server is doing while the repository is created: one request, so the steps are
 * said up front and the time counted, and a slow server is named as such, not left silent. */
function CreationProgress({ sample, seconds }: { sample: boolean; seconds: number }) {
  return (
    <div class="creation-progress" role="status" data-testid="create-progress">
      <progress aria-label="Creating the repository" />{" "}
      {sample ? "Creating the repository, then writing the sample: 5 files, 3 commits, a branch and a pull request" : "Creating the repository"}
      … {seconds} s
      {seconds >= 15 && <span class="note"> The server is taking longer than usual; it is still working.</span>}
    </div>
  );
}

export function CreateRepository(props: { sample?: boolean; initialName?: string; onCreated: (repo: Created) => void }) {
  const prefix = useDefaultPrefix();
  const [name, setName] = useState(props.initialName ?? "");
  const [namespace, setNamespace] = useState("");
  const [branch, setBranch] = useState("main");
  const [sample, setSample] = useState(props.sample ?? false);
  const [busy, setBusy] = useState(false);
  const [started, setStarted] = useState<number | null>(null);
  const seconds = useElapsed(started);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setStarted(Date.now());
    setError(undefined);
    const body: Record<string, unknown> = { name: name.trim(), default_branch: branch.trim() };
    if (namespace.trim()) body.storage_namespace = namespace.trim();
    if (sample) body.sample_data = true;
    let created: Created;
    try {
      created = await api.post<Created>("/repositories", body);
    } catch (failure) {
      setError(failure);
      setBusy(false);
      setStarted(null);
      return;
    }
    setBusy(false);
    setStarted(null);
    props.onCreated(created);
  };
  const optional = typeof prefix === "string";
  return (
    <form class="card create-repo" onSubmit={(event) => void submit(event)} data-testid="create-repository">
      <label>
        Name
        <input name="name" required maxLength={MAX_NAME} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <label>
        Storage namespace{optional ? " (optional)" : ""}
        <input
          name="storage_namespace"
          required={!optional}
          maxLength={MAX_NAMESPACE}
          placeholder={optional ? `${prefix}${name.trim() || "<name>"} when left empty` : "local://bucket/path"}
          value={namespace}
          onInput={(e) => setNamespace(e.currentTarget.value)}
        />
      </label>
      <label>
        Default branch
        <input name="default_branch" required maxLength={MAX_BRANCH} value={branch} onInput={(e) => setBranch(e.currentTarget.value)} />
      </label>
      <label class="checkbox">
        <input type="checkbox" name="sample_data" checked={sample} onChange={(e) => setSample(e.currentTarget.checked)} />
        Add sample data (CSV and Parquet tables, two commits and a pull request to review)
      </label>
      <ErrorNote error={error} />
      {busy && <CreationProgress sample={sample} seconds={seconds} />}
      <button type="submit" class="primary" disabled={busy}>
        {busy && sample ? "Creating with sample data…" : "Create"}
      </button>
    </form>
  );
}

/** Where the repository list is empty: what to do first. */
export function FirstRun(props: { onSample: () => void }) {
  return (
    <div class="first-run" data-testid="first-run">
      <p>
        <strong>No repositories yet.</strong> A repository holds data the way a Git repository holds code: branches,
        commits and pull requests over your files.
      </p>
      <p>Start with a sample: a few CSV and Parquet tables, a short history and a change waiting for review.</p>
      <button type="button" class="primary" onClick={props.onSample} data-testid="create-sample">
        Create a sample repository
      </button>
    </div>
  );
}
