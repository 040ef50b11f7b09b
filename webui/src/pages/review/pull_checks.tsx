// A pull request's checks: each hook of an action on `pull-request` events, run on the source's
// head, with its status, the commit it ran on, its run, its error and whether the destination's
// protection requires it; "Re-run" queues it again. The page refreshes the pull request while a
// check is pending or running (pull_page.tsx).
import { useState } from "preact/hooks";
import { ErrorNote } from "../../components/error_page";
import { Link } from "../../components/router";
import { outcomeClass, runHref } from "../actions/model";
import { commitHref, shortId } from "../refs/model";
import { type CheckRow, checkRows, type PullRequest, pullsApi } from "./pulls_api";

/** `onChange` gets the pull request as the re-run answered it (its check back to pending). */
export function ChecksPanel({ repo, pull, onChange }: { repo: string; pull: PullRequest; onChange: (pull: PullRequest | undefined) => void }) {
  const rows = checkRows(pull.checks, pull.required_checks);
  return (
    <section class="checks" data-testid="checks">
      <h3>Checks</h3>
      {rows.length === 0 ? (
        <p class="empty">No checks: no action runs on this pull request's events.</p>
      ) : (
        <ul class="check-list">
          {rows.map((row) => (
            <CheckItem key={row.name} repo={repo} pull={pull} row={row} onChange={onChange} />
          ))}
        </ul>
      )}
    </section>
  );
}

function CheckItem(props: { repo: string; pull: PullRequest; row: CheckRow; onChange: (pull: PullRequest | undefined) => void }) {
  const { repo, pull, row, onChange } = props;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const { check } = row;
  const rerun = async () => {
    setBusy(true);
    setError(undefined);
    try {
      onChange(await pullsApi.rerunCheck(repo, pull.id, row.name));
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const status = check?.status ?? "expected";
  return (
    <li class={`check ${outcomeClass(status)}`} data-testid="check" data-check-name={row.name}>
      <strong class="check-name" data-testid="check-name">
        {row.name}
      </strong>
      <span class={`badge ${outcomeClass(status)}`} data-testid="check-status">
        {status}
      </span>
      {row.required && (
        <span class="badge required" data-testid="check-required">
          Required
        </span>
      )}
      {check?.commit_id && (
        <span class="when">
          on{" "}
          <Link href={commitHref(repo, check.commit_id)} data-testid="check-commit">
            <code>{shortId(check.commit_id)}</code>
          </Link>
        </span>
      )}
      {!check && <span class="hint">required by the destination's protection; no action has reported it</span>}
      <span class="spacer" />
      {check?.run_id && (
        <Link href={runHref(repo, check.run_id)} data-testid="check-run">
          View run
        </Link>
      )}
      {check && pull.status === "open" && (
        <button type="button" disabled={busy} onClick={() => void rerun()} data-testid="check-rerun">
          Re-run
        </button>
      )}
      {check?.error && (
        <p class="check-error" data-testid="check-error">
          {check.error}
        </p>
      )}
      <ErrorNote error={error} />
    </li>
  );
}
