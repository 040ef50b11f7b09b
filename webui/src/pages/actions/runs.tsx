// The Actions tab: a repository's action runs, newest first, a page at a time, filtered by
// branch (a form) and by commit (`?commit=`, from a commit's page "Actions runs" link).
import { useEffect, useState } from "preact/hooks";
import { formatIsoTime } from "../../components/format";
import { PagedTable } from "../../components/paged_table";
import { Link, navigate } from "../../components/router";
import { commitHref, shortId } from "../refs/model";
import { type ActionRun, actionsApi, formatDuration, outcomeClass, runHref, runsHref } from "./model";

export function RunStatusBadge({ status, testId = "run-status" }: { status: string; testId?: string }) {
  return (
    <span class={`badge ${outcomeClass(status)}`} data-testid={testId}>
      {status}
    </span>
  );
}

export function ActionsPage({ repo, query }: { repo: string; query: URLSearchParams }) {
  const branch = query.get("branch") ?? "";
  const commit = query.get("commit") ?? "";
  const [typed, setTyped] = useState(branch);
  useEffect(() => setTyped(branch), [branch]);
  const filter = (event: Event) => {
    event.preventDefault();
    navigate(runsHref(repo, { branch: typed.trim(), commit }));
  };
  return (
    <section class="actions-page" data-testid="actions-page">
      <header class="page-header">
        <h2>Actions runs</h2>
      </header>
      <form class="inline-form" onSubmit={filter} data-testid="runs-filter">
        <label>
          Branch
          <input name="branch" placeholder="all branches" maxLength={256} value={typed} onInput={(e) => setTyped(e.currentTarget.value)} />
        </label>
        <button type="submit">Filter</button>
        {(branch || commit) && (
          <Link class="button" href={runsHref(repo)} data-testid="runs-filter-clear">
            Show all runs
          </Link>
        )}
      </form>
      {commit && (
        <p class="hint" data-testid="runs-commit-filter">
          Runs of commit{" "}
          <Link href={commitHref(repo, commit)}>
            <code>{shortId(commit)}</code>
          </Link>
          {branch ? (
            <>
              {" "}
              on <code>{branch}</code>
            </>
          ) : null}
          .
        </p>
      )}
      <PagedTable<ActionRun>
        testId="runs-table"
        resetKey={`${repo}/${branch}/${commit}`}
        load={(after, signal) => actionsApi.runs(repo, { branch, commit }, after, signal)}
        rowKey={(run) => run.run_id}
        empty={branch || commit ? "No runs match." : "No action has run in this repository."}
        columns={[
          {
            title: "Run",
            cell: (run) => (
              <Link href={runHref(repo, run.run_id)} data-testid="run-link">
                <code>{run.run_id}</code>
              </Link>
            ),
          },
          { title: "Event", cell: (run) => <span data-testid="run-event">{run.event_type}</span> },
          {
            title: "Branch",
            cell: (run) =>
              run.branch ? (
                <Link href={runsHref(repo, { branch: run.branch })} title="runs of this branch" data-testid="run-branch">
                  {run.branch}
                </Link>
              ) : (
                ""
              ),
          },
          { title: "Commit", cell: (run) => <CommitLink repo={repo} commitId={run.commit_id} /> },
          { title: "Status", cell: (run) => <RunStatusBadge status={run.status} /> },
          { title: "Started", cell: (run) => formatIsoTime(run.start_time) },
          { title: "Duration", className: "number", cell: (run) => formatDuration(run.start_time, run.end_time) },
        ]}
      />
    </section>
  );
}

/** A commit's short id linking to its page; a dash when the run has none (a refused commit). */
export function CommitLink({ repo, commitId }: { repo: string; commitId: string | null | undefined }) {
  if (!commitId) return <span class="muted">—</span>;
  return (
    <Link href={commitHref(repo, commitId)} data-testid="run-commit">
      <code>{shortId(commitId)}</code>
    </Link>
  );
}
