// What the branches and tags pages share: a form creating a ref from any source ref, a head
// commit's summary per row, and a confirmed delete.
import { useState } from "preact/hooks";
import { ConfirmDialog } from "../../components/confirm_dialog";
import { ErrorNote } from "../../components/error_page";
import { formatTime } from "../../components/format";
import { RefPicker } from "../../components/ref_picker";
import { Link } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { commitHref, getCommit, shortId } from "./model";

export interface CreateRefFormProps {
  repo: string;
  /** "branch" or "tag": the labels of the form. */
  kind: string;
  defaultSource: string;
  create: (name: string, source: string) => Promise<void>;
}

export function CreateRefForm(props: CreateRefFormProps) {
  const [name, setName] = useState("");
  const [source, setSource] = useState(props.defaultSource);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await props.create(name.trim(), source.trim());
      setName("");
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card create-ref" onSubmit={(event) => void submit(event)} data-testid={`create-${props.kind}`}>
      <h2>Create {props.kind}</h2>
      <label>
        New {props.kind} name
        <input value={name} required maxLength={256} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <label>
        From (branch, tag or commit)
        <input value={source} required maxLength={1024} onInput={(e) => setSource(e.currentTarget.value)} />
      </label>
      <RefPicker repo={props.repo} current={source} onSelect={setSource} />
      <ErrorNote error={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy || !name.trim() || !source.trim()}>
          Create {props.kind}
        </button>
      </div>
    </form>
  );
}

/** The commit a ref points at: id (linked), message, committer and date. */
export function HeadCommit({ repo, commitId }: { repo: string; commitId: string }) {
  const commit = useAsync((signal) => getCommit(repo, commitId, signal), [repo, commitId]);
  return (
    <span class="head-commit">
      <Link href={commitHref(repo, commitId)}>
        <code>{shortId(commitId)}</code>
      </Link>{" "}
      {commit.data && (
        <span class="muted">
          {commit.data.message} · {commit.data.committer} · {formatTime(commit.data.creation_date)}
        </span>
      )}
    </span>
  );
}

export interface DeleteRefProps {
  kind: string;
  name: string;
  remove: () => Promise<void>;
  onDeleted: () => void;
}

/** A delete button that asks first; the API's refusal shows in the dialog. */
export function DeleteRefButton(props: DeleteRefProps) {
  const [asking, setAsking] = useState(false);
  return (
    <>
      <button type="button" class="danger" onClick={() => setAsking(true)} aria-label={`Delete ${props.kind} ${props.name}`}>
        Delete
      </button>
      {asking && (
        <ConfirmDialog
          title={`Delete ${props.kind} ${props.name}?`}
          confirmLabel={`Delete ${props.kind}`}
          onConfirm={async () => {
            await props.remove();
            props.onDeleted();
          }}
          onClose={() => setAsking(false)}
        >
          <p>Its commits stay reachable from other refs; the name is gone.</p>
        </ConfirmDialog>
      )}
    </>
  );
}
