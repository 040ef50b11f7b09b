// One action run: what triggered it, its status and times, and its hooks, a page at a time; a
// hook's row expands to its output (its log, fetched when first shown, rendered as text).
import { useState } from "preact/hooks";
import { ErrorNote, ErrorPage, Loading } from "../../components/error_page";
import { formatIsoTime } from "../../components/format";
import { PagedTable } from "../../components/paged_table";
import { Link } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { type ActionRun, actionsApi, formatDuration, type HookRun, outcomeOf, runsHref } from "./model";
import { CommitLink, RunStatusBadge } from "./runs";

export function RunPage({ repo, runId }: { repo: string; runId: string }) {
  const run = useAsync((signal) => actionsApi.run(repo, runId, signal), [repo, runId]);
  if (run.error) return <ErrorPage error={run.error} />;
  if (!run.data) return <Loading what="run" />;
  return <RunDetails repo={repo} run={run.data} />;
}

function RunDetails({ repo, run }: { repo: string; run: ActionRun }) {
  const failed = outcomeOf(run.status) === "failed";
  return (
    <article class={`action-run${failed ? " run-failed" : ""}`} data-testid="run-page">
      <p class="crumbs">
        <Link href={runsHref(repo)}>Actions runs</Link> / <code>{run.run_id}</code>
      </p>
      <header class="page-header">
        <h2>
          Run of <code>{run.event_type}</code>
          {run.branch ? (
            <>
              {" "}
              on <code>{run.branch}</code>
            </>
          ) : null}
        </h2>
        <RunStatusBadge status={run.status} />
      </header>
      {failed && (
        <p class="run-failed-note" role="status" data-testid="run-failed">
          <strong>This run failed.</strong> Expand a failed hook to read its output.
        </p>
      )}
      <table class="details">
        <tbody>
          <tr>
            <th>Run ID</th>
            <td>
              <code data-testid="run-id">{run.run_id}</code>
            </td>
          </tr>
          <tr>
            <th>Event</th>
            <td>{run.event_type}</td>
          </tr>
          <tr>
            <th>Branch</th>
            <td>{run.branch ? <Link href={runsHref(repo, { branch: run.branch })}>{run.branch}</Link> : ""}</td>
          </tr>
          <tr>
            <th>Commit</th>
            <td>
              <CommitLink repo={repo} commitId={run.commit_id} />
            </td>
          </tr>
          <tr>
            <th>Started</th>
            <td>{formatIsoTime(run.start_time)}</td>
          </tr>
          <tr>
            <th>Ended</th>
            <td>{formatIsoTime(run.end_time)}</td>
          </tr>
          <tr>
            <th>Duration</th>
            <td>{formatDuration(run.start_time, run.end_time)}</td>
          </tr>
        </tbody>
      </table>
      <h3>Hooks</h3>
      <HooksTable repo={repo} runId={run.run_id} />
    </article>
  );
}

function HooksTable({ repo, runId }: { repo: string; runId: string }) {
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set());
  const toggle = (id: string) => {
    const next = new Set(open);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setOpen(next);
  };
  return (
    <PagedTable<HookRun>
      testId="hooks-table"
      resetKey={`${repo}/${runId}`}
      load={(after, signal) => actionsApi.hooks(repo, runId, after, signal)}
      rowKey={(hook) => hook.hook_run_id}
      empty="This run has no hooks."
      detail={(hook) => (open.has(hook.hook_run_id) ? <HookOutput repo={repo} runId={runId} hookRunId={hook.hook_run_id} /> : null)}
      columns={[
        { title: "Hook", cell: (hook) => <strong data-testid="hook-id">{hook.hook_id}</strong> },
        { title: "Action", cell: (hook) => hook.action },
        { title: "Status", cell: (hook) => <RunStatusBadge status={hook.status} testId="hook-status" /> },
        { title: "Started", cell: (hook) => formatIsoTime(hook.start_time) },
        { title: "Duration", className: "number", cell: (hook) => formatDuration(hook.start_time, hook.end_time) },
        {
          title: "Output",
          className: "row-actions",
          cell: (hook) => (
            <button
              type="button"
              aria-expanded={open.has(hook.hook_run_id)}
              onClick={() => toggle(hook.hook_run_id)}
              data-testid="hook-toggle"
            >
              {open.has(hook.hook_run_id) ? "Hide output" : "Show output"}
            </button>
          ),
        },
      ]}
    />
  );
}

function HookOutput({ repo, runId, hookRunId }: { repo: string; runId: string; hookRunId: string }) {
  const output = useAsync((signal) => actionsApi.output(repo, runId, hookRunId, signal), [repo, runId, hookRunId]);
  if (output.error) return <ErrorNote error={output.error} />;
  if (output.data === undefined) return <Loading what="output" />;
  if (!output.data) return <p class="empty">The hook wrote no output.</p>;
  return (
    <pre class="hook-output" data-testid="hook-output">
      {output.data}
    </pre>
  );
}
