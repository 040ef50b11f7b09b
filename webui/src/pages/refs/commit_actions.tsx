// Revert a commit on a branch, or cherry-pick it onto one: a button each, a confirmation that
// names the branch, and the API's refusals (conflict, protected branch, a hook) said plainly.
import { useState } from "preact/hooks";
import { ApiError, api, messageOf, seg } from "../../api";
import { ConfirmDialog } from "../../components/confirm_dialog";
import { ProtectedBadge } from "../../components/protected_badge";
import { refusalOf as causeOf, useWriteProtection } from "../../components/refusal";
import { Link } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { type Commit, type NamedRef, commitHref, repoPath, shortId } from "./model";

/** Branches offered as targets; any other can be typed. */
const BRANCHES_SHOWN = 100;

type Action = "revert" | "cherry-pick";

/** What a refusal means for this action, in words; a refusal whose cause the dialog names and
 * links to (a protection rule, a hook: components/refusal.ts) stays as the API said it. */
export function refusalOf(action: Action, branch: string, error: unknown): Error {
  const message = messageOf(error);
  if (!(error instanceof ApiError)) return new Error(message);
  const named = causeOf(error);
  if (named?.kind === "protection" || named?.kind === "hook") return error;
  const what = action === "revert" ? "The revert" : "The cherry-pick";
  switch (error.status) {
    case 409:
      return new Error(`${what} conflicts with changes on ${branch}: ${message}`);
    case 403:
      return new Error(`${what} was refused on ${branch} (a protected branch, or no permission): ${message}`);
    case 412:
      return new Error(`A hook refused ${action === "revert" ? "the revert" : "the cherry-pick"}: ${message}`);
    case 400:
      return new Error(`${what} cannot be done: ${message}`);
    default:
      return new Error(message);
  }
}

export function CommitActions({ repo, commit }: { repo: string; commit: Commit }) {
  const [action, setAction] = useState<Action | null>(null);
  const [done, setDone] = useState<{ action: Action; branch: string; commitId?: string } | null>(null);
  return (
    <div class="toolbar commit-actions">
      <button type="button" onClick={() => setAction("revert")} data-testid="revert-button">
        Revert…
      </button>
      <button type="button" onClick={() => setAction("cherry-pick")} data-testid="cherry-pick-button">
        Cherry-pick…
      </button>
      {done && (
        <span class="note" role="status" data-testid="commit-action-done">
          {done.action === "revert" ? "Reverted" : "Cherry-picked"} onto {done.branch}
          {done.commitId && (
            <>
              : <Link href={commitHref(repo, done.commitId)}>{shortId(done.commitId)}</Link>
            </>
          )}
        </span>
      )}
      {action && (
        <ActionDialog
          repo={repo}
          commit={commit}
          action={action}
          onDone={(branch, commitId) => setDone({ action, branch, commitId })}
          onClose={() => setAction(null)}
        />
      )}
    </div>
  );
}

function ActionDialog(props: {
  repo: string;
  commit: Commit;
  action: Action;
  onDone: (branch: string, commitId?: string) => void;
  onClose: () => void;
}) {
  const { repo, commit, action } = props;
  const branches = useAsync(
    (signal) => api.page<NamedRef>(`${repoPath(repo)}/branches`, {}, "", BRANCHES_SHOWN, signal),
    [repo],
  );
  const [branch, setBranch] = useState("");
  const target = branch || branches.data?.results[0]?.id || "";
  // A target a rule keeps direct writes off is named before anyone tries (the server refuses).
  const protectedBy = useWriteProtection(repo, target);
  const run = async () => {
    const path = `${repoPath(repo)}/branches/${seg(target)}/${action}`;
    // A merge commit is reverted or picked against its first parent; a revert always names
    // one (lakeFS requires it: 0 for a commit with a single parent).
    const merge = commit.parents.length > 1;
    const parent = merge ? { parent_number: 1 } : {};
    try {
      if (action === "revert") {
        await api.post(path, { ref: commit.id, parent_number: merge ? 1 : 0 });
        props.onDone(target);
      } else {
        const picked = await api.post<Commit>(path, { ref: commit.id, ...parent });
        props.onDone(target, picked.id);
      }
    } catch (error) {
      throw refusalOf(action, target, error);
    }
  };
  return (
    <ConfirmDialog
      title={action === "revert" ? `Revert ${shortId(commit.id)}?` : `Cherry-pick ${shortId(commit.id)}?`}
      confirmLabel={action === "revert" ? "Revert" : "Cherry-pick"}
      onConfirm={run}
      onClose={props.onClose}
    >
      <p>
        {action === "revert"
          ? "Commits, on the branch, the changes that undo this commit."
          : "Commits, on the branch, the changes this commit made."}{" "}
        <em>{commit.message}</em>
      </p>
      <label>
        Onto branch
        <select value={target} onChange={(event) => setBranch(event.currentTarget.value)} data-testid="action-branch">
          {branches.data?.results.map((named) => (
            <option key={named.id} value={named.id}>
              {named.id}
            </option>
          ))}
        </select>
      </label>
      {protectedBy.length > 0 && (
        <p class="note" data-testid="target-protected">
          <ProtectedBadge repo={repo} branch={target} patterns={protectedBy} refuses={action === "revert" ? "reverts" : "cherry-picks"} />
        </p>
      )}
    </ConfirmDialog>
  );
}
