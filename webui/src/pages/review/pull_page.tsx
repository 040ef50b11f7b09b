// One pull request: what it is, its checks, where its merge stands (approvals, and the API's
// reason when the merge is blocked), merge / close / reopen, its diff, reviews and comment thread.
// While a check is pending or running the pull request is read again every few seconds.
import { useEffect, useState } from "preact/hooks";
import { ErrorNote, ErrorPage, Loading } from "../../components/error_page";
import { href, Link } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { ApiError, seg } from "../../api";
import { ChecksPanel } from "./pull_checks";
import { PullDiff } from "./pull_diff";
import { CommentThread } from "./pull_comments";
import { ReviewsPanel } from "./pull_reviews";
import { checksInProgress, formatDate, type MergeStrategy, type PullRequest, pullsApi } from "./pulls_api";
import { pullsPath, StatusBadge } from "./pulls_list";

const VERBS: Record<string, string> = { open: "wants to merge", merged: "merged", closed: "proposed merging" };

/** How often the page reads the pull request again while a check has not finished. */
export const CHECKS_POLL_MS = 2000;

export function PullPage({ repo, id }: { repo: string; id: string }) {
  const pr = useAsync((signal) => pullsApi.get(repo, id, signal), [repo, id]);
  // Reviews and the merge box depend on each other's changes: one counter reloads both.
  const [version, setVersion] = useState(0);
  const changed = () => {
    pr.reload();
    setVersion((n) => n + 1);
  };
  const polling = checksInProgress(pr.data?.checks);
  const { reload, set } = pr;
  // A re-run answers the pull request with the check pending: shown at once (a quick hook may
  // be over before a reload), then the polling reads it again until the check is done.
  const rerun = (answered: PullRequest | undefined) => {
    const shown = answered && typeof answered === "object" && Array.isArray(answered.checks);
    if (shown) set(answered);
    if (!shown || !checksInProgress(answered.checks)) reload();
  };
  useEffect(() => {
    if (!polling) return;
    // One read at a time, the next one a while after the last answer; stopped when no check is
    // in progress any more or the page goes. A failed read is retried if it may pass next time
    // (the server unreachable or failing), else the page reloads to show the error.
    const controller = new AbortController();
    let timer = 0;
    const tick = () => {
      pullsApi.get(repo, id, controller.signal).then(
        (fresh) => {
          if (controller.signal.aborted) return;
          set(fresh);
          timer = window.setTimeout(tick, CHECKS_POLL_MS);
        },
        (failure: unknown) => {
          if (controller.signal.aborted) return;
          if (failure instanceof ApiError && (failure.status === 0 || failure.status >= 500)) timer = window.setTimeout(tick, CHECKS_POLL_MS);
          else reload();
        },
      );
    };
    timer = window.setTimeout(tick, CHECKS_POLL_MS);
    return () => {
      controller.abort();
      window.clearTimeout(timer);
    };
  }, [polling, repo, id, set, reload]);
  if (pr.error) return <ErrorPage error={pr.error} />;
  if (!pr.data) return <Loading what="pull request" />;
  const pull = pr.data;
  return (
    <article class="pull" data-testid="pull-page">
      <p class="crumbs">
        <Link href={href(pullsPath(repo))}>Pull requests</Link> / <code>{pull.id}</code>
      </p>
      <header class="page-header">
        <h2 data-testid="pull-title">{pull.title}</h2>
        <StatusBadge status={pull.status} />
      </header>
      <p class="pull-meta">
        <strong data-testid="pull-author">{pull.author}</strong> {VERBS[pull.status]}{" "}
        <code data-testid="pull-source">{pull.source_branch}</code> into{" "}
        <code data-testid="pull-destination">{pull.destination_branch}</code>, opened {formatDate(pull.creation_date)}
        {pull.closed_date ? `, ${pull.status} ${formatDate(pull.closed_date)}` : ""}
      </p>
      {pull.description && (
        <p class="description" data-testid="pull-description">
          {pull.description}
        </p>
      )}
      <ChecksPanel repo={repo} pull={pull} onChange={rerun} />
      <MergeBox repo={repo} pull={pull} onChange={changed} />
      <ReviewsPanel repo={repo} pull={pull} version={version} onChange={changed} />
      <h3>Changes</h3>
      <PullDiff repo={repo} pull={pull} />
      <h3>Conversation</h3>
      <CommentThread repo={repo} id={pull.id} />
    </article>
  );
}

const STRATEGIES: { value: MergeStrategy; label: string }[] = [
  { value: "", label: "fail on conflicts" },
  { value: "source-wins", label: "source wins conflicts" },
  { value: "dest-wins", label: "destination wins conflicts" },
];

function MergeBox({ repo, pull, onChange }: { repo: string; pull: PullRequest; onChange: () => void }) {
  const [strategy, setStrategy] = useState<MergeStrategy>("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const act = async (action: () => Promise<unknown>) => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
      onChange();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  if (pull.status === "merged") {
    return (
      <section class="merge-box merged" data-testid="merge-box">
        <p>
          Merged as commit{" "}
          <Link href={href(`/repositories/${seg(repo)}/commits/${seg(pull.merged_commit_id ?? "")}`)} data-testid="merged-commit">
            <code>{pull.merged_commit_id}</code>
          </Link>
          .
        </p>
      </section>
    );
  }
  const approvals =
    pull.required_approvals > 0
      ? `${pull.approvals} of ${pull.required_approvals} required approval(s)`
      : `${pull.approvals} approval(s); ${pull.destination_branch} requires none`;
  return (
    <section class="merge-box" data-testid="merge-box">
      <p class="approvals" data-testid="approvals">
        {approvals}
      </p>
      {pull.status === "open" && pull.merge_blocked_reason && (
        <p class="blocked" role="status" data-testid="merge-blocked">
          <strong>Merge blocked:</strong> {pull.merge_blocked_reason}
        </p>
      )}
      <ErrorNote error={error} />
      <div class="actions">
        {pull.status === "open" && (
          <>
            <label class="strategy">
              Strategy
              <select name="strategy" value={strategy} onChange={(e) => setStrategy(e.currentTarget.value as MergeStrategy)} data-testid="merge-strategy">
                {STRATEGIES.map((s) => (
                  <option key={s.value} value={s.value}>
                    {s.label}
                  </option>
                ))}
              </select>
            </label>
            <button type="button" class="primary" disabled={busy} onClick={() => void act(() => pullsApi.merge(repo, pull.id, strategy))} data-testid="merge">
              Merge
            </button>
            <button type="button" disabled={busy} onClick={() => void act(() => pullsApi.update(repo, pull.id, { status: "closed" }))} data-testid="close">
              Close
            </button>
          </>
        )}
        {pull.status === "closed" && (
          <button type="button" disabled={busy} onClick={() => void act(() => pullsApi.update(repo, pull.id, { status: "open" }))} data-testid="reopen">
            Reopen
          </button>
        )}
      </div>
      {pull.status === "open" && <p class="hint">A merge that fails on conflicts leaves the pull request open.</p>}
      {pull.status === "closed" && <p class="hint">Reopening starts the review afresh: earlier reviews are dropped.</p>}
    </section>
  );
}
