// Import objects in place into a branch (zero-copy, docs/import.md): lakeFS's import API. The
// dialog starts the import, then asks its status once a second (objects ingested so far) until
// the commit; an import still running can be canceled. Closing the dialog leaves it running.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, seg } from "../api";
import { ErrorNote } from "../components/error_page";

interface ImportStatus {
  completed: boolean;
  ingested_objects?: number;
  commit?: { id: string };
  error?: { message: string };
}

export interface StorageConfig {
  blockstore_type: string;
  import_support?: boolean;
}

// Asked once per page load: what the installation imports from does not change while it runs.
let storageConfig: Promise<StorageConfig | null> | undefined;

/** The blockstore's configuration, or null until known (or when it cannot be read). */
export function useStorageConfig(): StorageConfig | null {
  const [config, setConfig] = useState<StorageConfig | null>(null);
  useEffect(() => {
    storageConfig ??= api.get<{ storage_config?: StorageConfig }>("/config").then(
      (answer) => answer.storage_config ?? null,
      () => null,
    );
    let current = true;
    void storageConfig.then((answer) => current && setConfig(answer));
    return () => {
      current = false;
    };
  }, []);
  return config;
}

const POLL_MS = 1000;

export function ImportDialog(props: {
  repo: string;
  branch: string;
  prefix: string;
  blockstore: string;
  onImported: () => void;
  onClose: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [source, setSource] = useState("");
  const [kind, setKind] = useState<"common_prefix" | "object">("common_prefix");
  const [destination, setDestination] = useState(props.prefix);
  const [message, setMessage] = useState("");
  const [importId, setImportId] = useState<string | null>(null);
  const [status, setStatus] = useState<ImportStatus | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  const path = `/repositories/${seg(props.repo)}/branches/${seg(props.branch)}/import`;
  const running = importId !== null && !status?.completed && !status?.error;

  useEffect(() => {
    dialog.current?.showModal();
  }, []);

  useEffect(() => {
    if (importId === null) return;
    let stopped = false;
    const poll = async () => {
      try {
        const now = await api.get<ImportStatus>(path, { id: importId });
        if (stopped) return;
        setStatus(now);
        if (now.completed) props.onImported();
        if (!now.completed && !now.error) timer = setTimeout(() => void poll(), POLL_MS);
      } catch (failure) {
        if (!stopped) setError(failure);
      }
    };
    let timer = setTimeout(() => void poll(), 0);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [importId]);

  const start = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setStatus(null);
    try {
      const started = await api.post<{ id: string }>(path, {
        paths: [{ type: kind, path: source, destination }],
        commit: { message },
      });
      setImportId(started.id);
    } catch (failure) {
      setError(failure);
    }
  };
  const cancel = async () => {
    if (importId === null) return;
    try {
      await api.del(path, { id: importId });
    } catch (failure) {
      setError(failure);
    }
  };
  const example = props.blockstore === "s3" ? "s3://bucket/prefix/" : "local:///mnt/data/";
  return (
    <dialog ref={dialog} class="dialog" onClose={props.onClose} data-testid="import-dialog">
      <form onSubmit={(event) => void start(event)}>
        <h3>Import into {props.branch}</h3>
        <p class="note">
          Objects stay where they are: entries point at them, no byte is copied. What the branch has under the
          destination is replaced by what the import finds, in one commit.
        </p>
        <label>
          Source
          <input
            name="source"
            value={source}
            placeholder={example}
            required
            disabled={running}
            onInput={(event) => setSource(event.currentTarget.value)}
          />
        </label>
        <label>
          What
          <select
            name="kind"
            value={kind}
            disabled={running}
            onChange={(event) => setKind(event.currentTarget.value === "object" ? "object" : "common_prefix")}
          >
            <option value="common_prefix">every object under it (a prefix)</option>
            <option value="object">exactly that object</option>
          </select>
        </label>
        <label>
          {kind === "object" ? "Destination key" : "Destination prefix"}
          <input
            name="destination"
            value={destination}
            disabled={running}
            onInput={(event) => setDestination(event.currentTarget.value)}
          />
        </label>
        <label>
          Commit message
          <input
            name="message"
            value={message}
            placeholder="Import objects"
            disabled={running}
            onInput={(event) => setMessage(event.currentTarget.value)}
          />
        </label>
        <ErrorNote error={error ?? (status?.error ? new Error(status.error.message) : undefined)} />
        {importId !== null && !status?.error && (
          <p class="note" data-testid="import-status" role="status">
            {status?.completed
              ? `Imported ${(status.ingested_objects ?? 0).toLocaleString()} objects: commit ${status.commit?.id.slice(0, 12) ?? ""}`
              : `Importing… ${(status?.ingested_objects ?? 0).toLocaleString()} objects so far`}
          </p>
        )}
        <div class="actions">
          {running ? (
            <button type="button" class="danger" onClick={() => void cancel()}>
              Cancel import
            </button>
          ) : (
            <button type="submit" class="primary" disabled={source === ""}>
              Import
            </button>
          )}
          <button type="button" onClick={() => dialog.current?.close()}>
            Close
          </button>
        </div>
      </form>
    </dialog>
  );
}
