// Pull requests of a repository by status, a page at a time (the API's cursor), newest last as
// the API lists them (creation order).
import { formatIsoTime } from "../../components/format";
import { href, Link } from "../../components/router";
import { PagedTable } from "../../components/paged_table";
import { seg } from "../../api";
import { type PullRequest, pullsApi } from "./pulls_api";

const STATUSES: { value: string; label: string }[] = [
  { value: "open", label: "Open" },
  { value: "merged", label: "Merged" },
  // lakeFS's "closed" filter also lists merged pull requests.
  { value: "closed", label: "Closed or merged" },
  { value: "all", label: "All" },
];

export const PAGE_SIZE = 50;

export function pullsPath(repo: string): string {
  return `/repositories/${seg(repo)}/pulls`;
}

export function pullPath(repo: string, id: string): string {
  return `${pullsPath(repo)}/${seg(id)}`;
}

export function StatusBadge({ status }: { status: string }) {
  return (
    <span class={`badge status-${status}`} data-testid="pull-status">
      {status}
    </span>
  );
}

export function PullsPage({ repo, status }: { repo: string; status: string }) {
  const chosen = STATUSES.some((s) => s.value === status) ? status : "open";
  return (
    <section class="pulls" data-testid="pulls-page">
      <header class="page-header">
        <h2>Pull requests</h2>
        <Link class="button primary" href={href(pullsPath(repo) + "/new")} data-testid="new-pull">
          New pull request
        </Link>
      </header>
      <nav class="filters" aria-label="status">
        {STATUSES.map((s) => (
          <Link
            key={s.value}
            href={href(pullsPath(repo), { status: s.value })}
            class={s.value === chosen ? "filter selected" : "filter"}
            aria-current={s.value === chosen ? "page" : undefined}
            data-testid={`status-${s.value}`}
          >
            {s.label}
          </Link>
        ))}
      </nav>
      <PagedTable<PullRequest>
        testId="pulls-table"
        resetKey={`${repo}/${chosen}`}
        load={(after, signal) => pullsApi.list(repo, chosen, after, PAGE_SIZE, signal)}
        rowKey={(pr) => pr.id}
        empty={`No ${chosen === "all" ? "" : chosen + " "}pull requests.`}
        columns={[
          {
            title: "Title",
            cell: (pr) => (
              <Link href={href(pullPath(repo, pr.id))} data-testid="pull-link">
                {pr.title}
              </Link>
            ),
          },
          { title: "Status", cell: (pr) => <StatusBadge status={pr.status} /> },
          { title: "Branches", cell: (pr) => `${pr.source_branch} → ${pr.destination_branch}` },
          { title: "Author", cell: (pr) => pr.author },
          { title: "Opened", cell: (pr) => formatIsoTime(pr.creation_date) },
        ]}
      />
    </section>
  );
}
