// One commit: its id (copied with a button), message, committer, date, metadata and parents,
// the object browser at this commit, a link to the action runs of the commit, its diff against its first parent as a tree of folders, and revert /
// cherry-pick onto a branch.
import { seg } from "../../api";
import { CopyButton } from "../../components/copy_uri";
import { ErrorPage, Loading } from "../../components/error_page";
import { formatTime } from "../../components/format";
import { Link } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { runsHref } from "../actions/model";
import { objectsHref } from "../objects_paths";
import { CommitActions } from "./commit_actions";
import { DiffTree } from "./diff_tree";
import { type Commit, commitHref, getCommit, repoPath, shortId } from "./model";

export function CommitPage({ repo, commitId }: { repo: string; commitId: string }) {
  const commit = useAsync((signal) => getCommit(repo, commitId, signal), [repo, commitId]);
  if (commit.error) return <ErrorPage error={commit.error} />;
  if (!commit.data) return <Loading what="commit" />;
  return <CommitDetails repo={repo} commit={commit.data} />;
}

function CommitDetails({ repo, commit }: { repo: string; commit: Commit }) {
  const metadata = Object.entries(commit.metadata ?? {});
  const parent = commit.parents[0];
  return (
    <div class="refs-page" data-testid="commit-page">
      <h2 class="commit-message">{commit.message}</h2>
      <div class="toolbar">
        <Link href={objectsHref(repo, commit.id, "")} class="button" data-testid="browse-at-commit">
          Browse at this commit
        </Link>
      </div>
      <CommitActions repo={repo} commit={commit} />
      <table class="details">
        <tbody>
          <tr>
            <th>ID</th>
            <td>
              <code data-testid="commit-id">{commit.id}</code>{" "}
              <CopyButton value={commit.id} label="Copy ID" testId="copy-commit-id" />
            </td>
          </tr>
          <tr>
            <th>Committer</th>
            <td>{commit.committer}</td>
          </tr>
          <tr>
            <th>Date</th>
            <td>{formatTime(commit.creation_date)}</td>
          </tr>
          <tr>
            <th>Parents</th>
            <td data-testid="commit-parents">
              {commit.parents.length === 0 && "none"}
              {commit.parents.map((id) => (
                <Link key={id} class="parent-link" href={commitHref(repo, id)}>
                  <code>{shortId(id)}</code>
                </Link>
              ))}
            </td>
          </tr>
          <tr>
            <th>Actions</th>
            <td>
              <Link href={runsHref(repo, { commit: commit.id })} data-testid="commit-actions-link">
                Actions runs
              </Link>
            </td>
          </tr>
        </tbody>
      </table>
      <h3>Metadata</h3>
      {metadata.length === 0 ? (
        <p class="empty">No metadata.</p>
      ) : (
        <table class="details" data-testid="commit-metadata">
          <tbody>
            {metadata.map(([key, value]) => (
              <tr key={key}>
                <th>{key}</th>
                <td>{value}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Changes{parent ? ` against ${shortId(parent)}` : ""}</h3>
      {parent ? (
        <DiffTree
          path={`${repoPath(repo)}/refs/${seg(parent)}/diff/${seg(commit.id)}/summary`}
          repo={repo}
          diffRefs={{ left: parent, right: commit.id }}
          query={{ type: "two_dot" }}
          resetKey={commit.id}
          empty="This commit changes nothing."
          testId="commit-diff"
        />
      ) : (
        <p class="empty">The repository's first commit has no parent to compare with.</p>
      )}
    </div>
  );
}
