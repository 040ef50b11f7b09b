// A branch's uncommitted changes: a tree of folders with counts and sizes against its head, reset of one path or of
// everything (confirmed), and a commit with a message and metadata.
import { useState } from "preact/hooks";
import { api, seg } from "../../api";
import { ConfirmDialog } from "../../components/confirm_dialog";
import { ProtectedBadge } from "../../components/protected_badge";
import { useWriteProtection } from "../../components/refusal";
import { ErrorNote, ErrorPage, Loading } from "../../components/error_page";
import { repoHref } from "../../components/layout";
import { type Metadata, MetadataEditor } from "../../components/metadata_editor";
import { RefPicker } from "../../components/ref_picker";
import { Link, navigate } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { DiffTree, type TreeRow } from "./diff_tree";
import { type Commit, commitHref, refOrDefault, repoPath, shortId } from "./model";

export function ChangesPage({ repo, query }: { repo: string; query: URLSearchParams }) {
  const branch = useAsync((signal) => refOrDefault(repo, query.get("ref"), signal), [repo, query.get("ref")]);
  if (branch.error) return <ErrorPage error={branch.error} />;
  if (!branch.data) return <Loading what="branch" />;
  return <BranchChanges key={branch.data} repo={repo} branch={branch.data} />;
}

function BranchChanges({ repo, branch }: { repo: string; branch: string }) {
  // Bumped after every change to the branch, so the diff starts over from its first page.
  const [generation, setGeneration] = useState(0);
  const [actionError, setActionError] = useState<unknown>(undefined);
  const [confirmReset, setConfirmReset] = useState(false);
  const branchPath = `${repoPath(repo)}/branches/${seg(branch)}`;
  const changed = () => setGeneration((n) => n + 1);
  // A branch whose protection refuses direct writes offers no commit or reset: it says why.
  const protectedBy = useWriteProtection(repo, branch);
  const writable = protectedBy.length === 0;

  const resetPath = async (row: TreeRow) => {
    setActionError(undefined);
    try {
      const type = row.path_type === "common_prefix" ? "common_prefix" : "object";
      await api.put(branchPath, { type, path: row.path });
      changed();
    } catch (error) {
      setActionError(error);
    }
  };

  return (
    <div class="refs-page" data-testid="changes-page">
      <div class="toolbar">
        <RefPicker repo={repo} current={branch} onSelect={(ref) => navigate(repoHref(repo, "changes", { ref }))} />
        {writable ? (
          <button type="button" class="danger" onClick={() => setConfirmReset(true)}>
            Reset all changes
          </button>
        ) : (
          <ProtectedBadge repo={repo} branch={branch} patterns={protectedBy} refuses="commits or resets" />
        )}
      </div>
      {writable && <CommitForm repo={repo} branch={branch} onCommitted={changed} />}
      <h2>Uncommitted changes on {branch}</h2>
      <div data-testid="reset-result">
        <ErrorNote error={actionError} />
      </div>
      <DiffTree
        path={`${branchPath}/diff/summary`}
        repo={repo}
        diffRefs={{ left: `${branch}@`, right: branch }}
        resetKey={`${branch}/${generation}`}
        empty="No uncommitted changes."
        testId="changes-table"
        actions={
          writable
            ? (row) => (
                <button type="button" onClick={() => void resetPath(row)} aria-label={`Reset ${row.path}`}>
                  Reset
                </button>
              )
            : undefined
        }
      />
      {confirmReset && writable && (
        <ConfirmDialog
          title={`Reset all uncommitted changes on ${branch}?`}
          confirmLabel="Reset all"
          onConfirm={async () => {
            await api.put(branchPath, { type: "reset" });
            changed();
          }}
          onClose={() => setConfirmReset(false)}
        >
          <p>Every uncommitted write and delete on this branch is dropped. This cannot be undone.</p>
        </ConfirmDialog>
      )}
    </div>
  );
}

function CommitForm(props: { repo: string; branch: string; onCommitted: () => void }) {
  const [message, setMessage] = useState("");
  const [metadata, setMetadata] = useState<Metadata>({});
  // A new editor (empty rows) after each commit.
  const [editorKey, setEditorKey] = useState(0);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [committed, setCommitted] = useState<Commit | null>(null);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const commit = await api.post<Commit>(`${repoPath(props.repo)}/branches/${seg(props.branch)}/commits`, {
        message,
        metadata,
      });
      setCommitted(commit);
      setMessage("");
      setMetadata({});
      setEditorKey((n) => n + 1);
      props.onCommitted();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card commit-form" onSubmit={(event) => void submit(event)} data-testid="commit-form">
      <h2>Commit</h2>
      <label>
        Commit message
        <input name="message" value={message} required maxLength={4096} onInput={(e) => setMessage(e.currentTarget.value)} />
      </label>
      <MetadataEditor key={editorKey} onChange={setMetadata} />
      <ErrorNote error={error} repo={props.repo} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy || !message.trim()}>
          Commit changes
        </button>
      </div>
      {committed && (
        <p class="note" role="status" data-testid="committed">
          Committed{" "}
          <Link href={commitHref(props.repo, committed.id)}>{shortId(committed.id)}</Link>
          : {committed.message}
        </p>
      )}
    </form>
  );
}
