// One path's history at a ref: the commits that changed it, newest first, each with who, when
// and why, the object as that commit has it (size, checksum) and a link to its diff with the
// commit's parent.
import { ApiError, api, seg } from "../../api";
import { ErrorPage, Loading } from "../../components/error_page";
import { formatBytes, formatTime } from "../../components/format";
import { PagedTable } from "../../components/paged_table";
import { RefPicker } from "../../components/ref_picker";
import { Link, href, navigate } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { objectHref } from "../objects_paths";
import { pathHistory } from "./last_change";
import { type Commit, commitHref, refOrDefault, repoPath, shortId } from "./model";

/** Commits a page shows: each asks for its object's stat too. */
const HISTORY_PAGE = 20;

export function objectHistoryHref(repo: string, ref: string, path: string): string {
  return href(`/repositories/${encodeURIComponent(repo)}/object-history`, { ref, path });
}

export function diffHref(repo: string, left: string, right: string, path: string): string {
  return href(`/repositories/${encodeURIComponent(repo)}/diff`, { left, right, path });
}

export function ObjectHistoryPage({ repo, query }: { repo: string; query: URLSearchParams }) {
  const ref = useAsync((signal) => refOrDefault(repo, query.get("ref"), signal), [repo, query.get("ref")]);
  const path = query.get("path") ?? "";
  if (ref.error) return <ErrorPage error={ref.error} />;
  if (!ref.data) return <Loading what="ref" />;
  const current = ref.data;
  return (
    <div class="refs-page" data-testid="object-history-page">
      <div class="toolbar">
        <RefPicker repo={repo} current={current} onSelect={(next) => navigate(objectHistoryHref(repo, next, path))} />
      </div>
      <h2>
        History of <code>{path}</code>{" "}
        {!path.endsWith("/") && (
          <Link href={objectHref(repo, current, path)} class="note">
            (object at {current})
          </Link>
        )}
      </h2>
      <PagedTable<Commit>
        load={(after, signal) => pathHistory(repo, current, path, after, HISTORY_PAGE, signal)}
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
          { title: "Object at the commit", cell: (commit) => (path.endsWith("/") ? "" : <StatAt repo={repo} commit={commit.id} path={path} />) },
          {
            title: "",
            cell: (commit) =>
              commit.parents[0] ? (
                <Link href={diffHref(repo, commit.parents[0], commit.id, path)} data-testid="diff-with-previous">
                  Diff with previous
                </Link>
              ) : (
                ""
              ),
          },
        ]}
        rowKey={(commit) => commit.id}
        resetKey={`${current}\u0000${path}`}
        empty="No commit changed this path."
        testId="object-history"
      />
    </div>
  );
}

interface Stat {
  size_bytes?: number;
  checksum?: string;
}

function StatAt({ repo, commit, path }: { repo: string; commit: string; path: string }) {
  const stat = useAsync(
    (signal) =>
      api.get<Stat>(`${repoPath(repo)}/refs/${seg(commit)}/objects/stat`, { path, user_metadata: false }, signal).catch((error: unknown) => {
        // Not found at this commit: the commit deleted it.
        if (error instanceof ApiError && error.status === 404) return null;
        throw error;
      }),
    [repo, commit, path],
  );
  if (stat.loading) return <span class="muted">…</span>;
  if (stat.error) return <span class="muted">unavailable</span>;
  if (!stat.data) return <span class="muted">deleted</span>;
  return (
    <span data-testid="stat-at">
      {formatBytes(stat.data.size_bytes ?? 0)} <code title={stat.data.checksum}>{(stat.data.checksum ?? "").slice(0, 12)}</code>
    </span>
  );
}
