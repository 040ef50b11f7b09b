// One pull request: what it is, its checks, where its merge stands (approvals, the API's reason
// when the merge is blocked, and the conflicts a merge would meet, asked before anyone presses
// Merge), merge / close / reopen, its diff, reviews and comment thread.
// While a check is pending or running the pull request is read again every few seconds.
import { formatIsoTime } from "../../components/format";
import { useEffect, useState } from "preact/hooks";
import { ErrorNote, ErrorPage, Loading } from "../../components/error_page";
import { href, Link } from "../../components/router";
import { type Async, useAsync } from "../../components/use_async";
import { ApiError, messageOf, seg } from "../../api";
import { ConflictTable } from "../refs/compare";
import { type MergeCheck, checkMerge, nothingToMerge } from "../refs/merge";
import { ChecksPanel } from "./pull_checks";
import { PullDiff } from "./pull_diff";
import { CommentThread } from "./pull_comments";
import { ReviewsPanel } from "./pull_reviews";
import { checksInProgress, type MergeStrategy, type PullRequest, pullsApi } from "./pulls_api";
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
        <code data-testid="pull-destination">{pull.destination_branch}</code>, opened {formatIsoTime(pull.creation_date)}
        {pull.closed_date ? `, ${pull.status} ${formatIsoTime(pull.closed_date)}` : ""}
      </p>
      {pull.description && (
        <p class="description" data-testid="pull-description">
          {pull.description}
        </p>
      )}
      <ChecksPanel repo={repo} pull={pull} onChange={rerun} />
      <MergeBox repo={repo} pull={pull} version={version} onChange={changed} />
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

function MergeBox({ repo, pull, version, onChange }: { repo: string; pull: PullRequest; version: number; onChange: () => void }) {
  const [strategy, setStrategy] = useState<MergeStrategy>("");
  const open = pull.status === "open";
  // Asked again after every change made here (a review, a failed merge) and whenever the
  // checks name a new source head.
  const head = pull.checks?.[0]?.commit_id ?? "";
  const check = useAsync(
    (signal) => (open ? checkMerge(repo, pull.source_branch, pull.destination_branch, signal) : Promise.resolve(null)),
    [repo, pull.source_branch, pull.destination_branch, open, version, head],
  );
  const conflicts = check.data?.conflicts ?? [];
  // Conflicts stop a merge only when no strategy lets one side win.
  const stopped = conflicts.length > 0 && strategy === "";
  // Nothing to merge (the source is already in the destination): Merge is not offered, Close is.
  const empty = check.data ? nothingToMerge(check.data) : false;
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
      // The branches may have moved since the check: a conflict it did not see is listed now.
      check.reload();
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
    <section class={conflicts.length > 0 ? "merge-box conflicted" : "merge-box"} data-testid="merge-box">
      <p class="approvals" data-testid="approvals">
        {approvals}
      </p>
      {pull.status === "open" && pull.merge_blocked_reason && (
        <p class="blocked" role="status" data-testid="merge-blocked">
          <strong>Merge blocked:</strong> {pull.merge_blocked_reason}
        </p>
      )}
      {open && <MergeCheckNote repo={repo} pull={pull} check={check} />}
      {open && empty && (
        <p class="note" role="status" id="nothing-to-merge" data-testid="nothing-to-merge">
          Nothing to merge: {pull.source_branch} is already in {pull.destination_branch}. Add commits to {pull.source_branch}, or close the pull
          request.
        </p>
      )}
      <ErrorNote error={error} repo={repo} />
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
            <button
              type="button"
              class="primary"
              disabled={busy || stopped || empty}
              title={stopped ? "Conflicts would stop this merge: choose a strategy" : empty ? "Nothing to merge" : undefined}
              aria-describedby={stopped ? "merge-stopped" : empty ? "nothing-to-merge" : undefined}
              onClick={() => void act(() => pullsApi.merge(repo, pull.id, strategy))}
              data-testid="merge"
            >
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
      {stopped && (
        <p class="hint" id="merge-stopped" data-testid="merge-stopped">
          Merge is off while it would stop on these conflicts: choose a strategy that lets one side win, or resolve them on{" "}
          {pull.source_branch}.
        </p>
      )}
      {pull.status === "open" && <p class="hint">A merge that fails on conflicts leaves the pull request open.</p>}
      {pull.status === "closed" && <p class="hint">Reopening starts the review afresh: earlier reviews are dropped.</p>}
    </section>
  );
}

/** Where the merge stands against the destination now: checking, no conflicts, or the
 * conflicts it would meet (as the Compare page lists them) with what to do about them. */
function MergeCheckNote(props: { repo: string; pull: PullRequest; check: Async<MergeCheck | null> }) {
  const { pull, check } = props;
  if (check.error) {
    return (
      <p class="hint" data-testid="merge-check">
        Could not check for conflicts: {messageOf(check.error)}
      </p>
    );
  }
  if (!check.data) return <p class="hint" data-testid="merge-check">Checking for conflicts with {pull.destination_branch}…</p>;
  const { conflicts, conflicts_truncated: truncated } = check.data;
  if (conflicts.length === 0) {
    return (
      <p class="mergeable" role="status" data-testid="merge-check" data-mergeable="true">
        No conflicts with {pull.destination_branch}
        {truncated ? " among the changes examined (more were not)" : ""}.
      </p>
    );
  }
  return (
    <div class="conflicts" role="alert" data-testid="pull-conflicts" data-mergeable="false">
      <h3>
        This merge would conflict on {conflicts.length}
        {truncated ? "+" : ""} path{conflicts.length === 1 && !truncated ? "" : "s"}
      </h3>
      <p>
        Both {pull.source_branch} and {pull.destination_branch} changed these paths since they diverged. Choose a strategy to let one side win
        (source wins: {pull.source_branch}&apos;s version; destination wins: {pull.destination_branch}&apos;s), or resolve them with a
        commit on {pull.source_branch}.
      </p>
      <ConflictTable conflicts={conflicts} tables={check.data.tables} base={pull.destination_branch} compare={pull.source_branch} />
      {truncated && <p class="note">More conflicts were not examined.</p>}
    </div>
  );
}
