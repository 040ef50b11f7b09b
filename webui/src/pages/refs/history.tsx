// The commit log of any ref, one page at a time, each commit linking to its page.
import { api, seg } from "../../api";
import { ErrorPage, Loading } from "../../components/error_page";
import { formatTime } from "../../components/format";
import { repoHref } from "../../components/layout";
import { PagedTable } from "../../components/paged_table";
import { RefPicker } from "../../components/ref_picker";
import { Link, navigate } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { type Commit, PAGE_SIZE, commitHref, refOrDefault, repoPath, shortId } from "./model";

export function HistoryPage({ repo, query }: { repo: string; query: URLSearchParams }) {
  const ref = useAsync((signal) => refOrDefault(repo, query.get("ref"), signal), [repo, query.get("ref")]);
  if (ref.error) return <ErrorPage error={ref.error} />;
  if (!ref.data) return <Loading what="ref" />;
  const current = ref.data;
  return (
    <div class="refs-page" data-testid="history-page">
      <div class="toolbar">
        <RefPicker repo={repo} current={current} onSelect={(next) => navigate(repoHref(repo, "commits", { ref: next }))} />
      </div>
      <PagedTable<Commit>
        load={(after, signal) => api.page<Commit>(`${repoPath(repo)}/refs/${seg(current)}/commits`, {}, after, PAGE_SIZE, signal)}
        columns={[
          {
            title: "Commit",
            cell: (commit) => (
              <Link href={commitHref(repo, commit.id)}>
                <code>{shortId(commit.id)}</code>
              </Link>
            ),
          },
          { title: "Message", cell: (commit) => commit.message },
          { title: "Committer", cell: (commit) => commit.committer },
          { title: "Date", cell: (commit) => formatTime(commit.creation_date) },
        ]}
        rowKey={(commit) => commit.id}
        resetKey={current}
        empty="No commits."
        testId="commit-log"
      />
    </div>
  );
}
