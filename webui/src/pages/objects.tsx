// The object browser at any ref: a directory (one page of up to 1,000 entries at a time, the
// API's cursor in the URL, so 100,000 entries are as quick as 1,000), and one object's page
// with details, preview, download and delete. Any ref can be browsed: a tag or a commit is
// read-only (no upload, import or delete). Each entry shows the last commit that changed it,
// links to its history and copies its URIs; on a branch, uncommitted changes are marked
// (objects_changes.tsx), and a directory's README.md is rendered under it (objects_readme.tsx).
// An Iceberg table's directory is badged in its namespace's listing and opens on the table's
// schema and snapshots, its files one tab away (objects_iceberg.tsx).
import { Component } from "preact";
import { useState } from "preact/hooks";
import { ApiError, type Page, api, apiUrl, seg } from "../api";
import { ConfirmDialog } from "../components/confirm_dialog";
import { ProtectedBadge } from "../components/protected_badge";
import { CopyUris } from "../components/copy_uri";
import { ErrorPage, Loading } from "../components/error_page";
import { formatBytes, formatTime } from "../components/format";
import { RefPicker } from "../components/ref_picker";
import { Link, navigate } from "../components/router";
import { useWriteProtection } from "../components/refusal";
import { useAsync } from "../components/use_async";
import { useIsAdmin } from "../components/user";
import { type Change, ChangeMark, removedEntries, useUncommitted } from "./objects_changes";
import { TableBadge, TableTabs, isTableDirectory, useTableDirectories } from "./objects_iceberg";
import { ImportDialog, useStorageConfig } from "./objects_import";
import { crumbs, objectHref, objectsHref, parentOf } from "./objects_paths";
import { queryHref } from "./diff/diff_links";
import { Preview, objectUrlPath, previewKind } from "./objects_preview";
import { DirectoryReadme, readmeOf } from "./objects_readme";
import { UploadDropZone, UploadForm } from "./objects_upload";
import { BLAME_ROWS, type LastChange, OLDER, lastChange, useLastChanges } from "./refs/last_change";
import { commitHref, shortId } from "./refs/model";
import { objectHistoryHref } from "./refs/object_history";
import type { Repository } from "./repos";

export const DIRECTORY_PAGE = 1000;

export interface ObjectStats {
  path: string;
  path_type: "object" | "common_prefix";
  physical_address?: string;
  checksum?: string;
  size_bytes?: number;
  mtime?: number;
  content_type?: string;
  metadata?: Record<string, string>;
}

/** The ref in the URL, or else the repository's default branch. */
function useRef(repo: string, wanted: string | null) {
  return useAsync(
    async (signal) => wanted || (await api.get<Repository>(`/repositories/${seg(repo)}`, {}, signal)).default_branch,
    [repo, wanted],
  );
}

/** Whether the ref is a branch (only branches take uploads and deletes); asked beside the
 * page's own calls, never before them. */
function useIsBranch(repo: string, ref: string) {
  return useAsync(async (signal) => {
    try {
      await api.get(`/repositories/${seg(repo)}/branches/${seg(ref)}`, {}, signal);
      return true;
    } catch (error) {
      if (error instanceof ApiError && (error.status === 404 || error.status === 400)) return false;
      throw error;
    }
  }, [repo, ref]).data;
}

function Breadcrumbs({ repo, ref, path }: { repo: string; ref: string; path: string }) {
  return (
    <nav class="breadcrumbs" aria-label="path" data-testid="breadcrumbs">
      <Link href={objectsHref(repo, ref, "")}>{repo}</Link>
      {crumbs(path).map(({ name, prefix, link }) => (
        <span key={prefix}>
          {" / "}
          {link ? <Link href={objectsHref(repo, ref, prefix)}>{name}</Link> : <strong>{name}</strong>}
        </span>
      ))}
    </nav>
  );
}

export function ObjectsPage({ repo, query }: { repo: string; query: URLSearchParams }) {
  const ref = useRef(repo, query.get("ref"));
  if (ref.loading) return <Loading what="ref" />;
  if (ref.error || !ref.data) return <ErrorPage error={ref.error} />;
  return <Directory repo={repo} ref_={ref.data} path={query.get("path") ?? ""} after={query.get("after") ?? ""} page={Number(query.get("page") ?? "1") || 1} />;
}

function Directory(props: { repo: string; ref_: string; path: string; after: string; page: number }) {
  const { repo, ref_: ref, path, after } = props;
  const branch = useIsBranch(repo, ref);
  const storage = useStorageConfig();
  // A branch whose protection refuses direct writes is marked, and offers no upload or import.
  const protectedBy = useWriteProtection(repo, branch === true ? ref : "");
  const writable = branch === true && protectedBy.length === 0;
  const [uploading, setUploading] = useState(false);
  const [importing, setImporting] = useState(false);
  const listing = useAsync(
    (signal) =>
      api.page<ObjectStats>(`${objectUrlPath(repo, ref)}/ls`, { prefix: path, delimiter: "/", user_metadata: false }, after, DIRECTORY_PAGE, signal),
    [repo, ref, path, after],
  );
  const files = (data: Page<ObjectStats>) => (
    <UploadDropZone enabled={writable} repo={repo} branch={ref} prefix={path} onUploaded={listing.reload}>
      <DirectoryTable {...props} listing={data} branch={branch} />
    </UploadDropZone>
  );
  return (
    <section class="objects">
      <div class="toolbar">
        <RefPicker repo={repo} current={ref} onSelect={(next) => navigate(objectsHref(repo, next, path))} />
        <Breadcrumbs repo={repo} ref={ref} path={path} />
        <span class="spacer" />
        {writable && (
          <button type="button" onClick={() => setUploading(!uploading)}>
            Upload
          </button>
        )}
        {writable && storage?.import_support && (
          <button type="button" onClick={() => setImporting(true)}>
            Import
          </button>
        )}
        {branch === true && protectedBy.length > 0 && <ProtectedBadge repo={repo} branch={ref} patterns={protectedBy} refuses="uploads or deletes" />}
        {branch === false && (
          <span class="read-only-badge" data-testid="read-only" title="A tag or a commit cannot change: no upload, import or delete here">
            read-only: {ref} is not a branch
          </span>
        )}
      </div>
      {uploading && writable && (
        <UploadForm
          repo={repo}
          branch={ref}
          prefix={path}
          onUploaded={() => {
            setUploading(false);
            listing.reload();
          }}
        />
      )}
      {importing && storage && (
        <ImportDialog
          repo={repo}
          branch={ref}
          prefix={path}
          blockstore={storage.blockstore_type}
          onImported={listing.reload}
          onClose={() => setImporting(false)}
        />
      )}
      {listing.loading && <Loading what="objects" />}
      {listing.error !== undefined && <ErrorPage error={listing.error} />}
      {listing.data && (path !== "" && isTableDirectory(listing.data.results, path) ? (
        <TableTabs key={`${ref}:${path}`} repo={repo} ref={ref} directory={path} files={files(listing.data)} />
      ) : (
        files(listing.data)
      ))}
    </section>
  );
}

interface ListingRowProps {
  repo: string;
  ref_: string;
  dir: string;
  item: ObjectStats;
  change: LastChange | undefined;
  mark: Change | undefined;
  table: boolean;
}

/** One entry of a directory listing. Re-rendered only when its own props change: the last
 * changes arrive in batches over seconds, and each batch re-rendered every row of a 1,000-row
 * page (about 60 ms of the browser's main thread a batch) for the hundred it changes. */
class ListingRow extends Component<ListingRowProps> {
  shouldComponentUpdate(next: ListingRowProps): boolean {
    const current = this.props;
    return (Object.keys(next) as (keyof ListingRowProps)[]).some((name) => next[name] !== current[name]);
  }

  render() {
    const { repo, ref_: ref, dir, item, change, mark, table } = this.props;
    const directory = item.path_type === "common_prefix";
    const name = item.path.slice(dir.length);
    return (
      <tr class={directory ? "directory-row" : undefined}>
        <td>
          <Link href={(directory ? objectsHref : objectHref)(repo, ref, item.path)} class="entry-name" data-testid="entry">
            {name}
          </Link>{" "}
          {directory && table && <TableBadge />} <ChangeMark change={mark} />
        </td>
        <td>{directory ? null : formatBytes(item.size_bytes ?? 0)}</td>
        <td>{directory ? null : formatTime(item.mtime)}</td>
        <td>
          <LastChangeCell repo={repo} commit={change} />
        </td>
        <td class="row-actions">
          <CopyUris repo={repo} ref={ref} path={item.path} compact />
          {!directory && (
            <a href={apiUrl(objectUrlPath(repo, ref), { path: item.path })} download={name}>
              Download
            </a>
          )}
        </td>
      </tr>
    );
  }
}

function DirectoryTable(props: { repo: string; ref_: string; path: string; after: string; page: number; listing: Page<ObjectStats>; branch: boolean | undefined }) {
  const { repo, ref_: ref, path, listing, page } = props;
  const { has_more: more, next_offset: next } = listing.pagination;
  const changes = useLastChanges(repo, ref, listing.results.map((item) => item.path));
  const uncommitted = useUncommitted(repo, ref, path, props.after, props.branch, listing);
  const removed = removedEntries(uncommitted, listing.results, more);
  const readme = readmeOf(listing.results, path);
  const tables = useTableDirectories(repo, ref, path, listing.results);
  return (
    <div data-testid="directory">
      <table class="listing">
        <thead>
          <tr>
            <th>Name</th>
            <th>Size</th>
            <th>Modified</th>
            <th>Last change</th>
            <th class="row-actions" />
          </tr>
        </thead>
        <tbody>
          {path && props.after === "" && (
            <tr>
              <td colSpan={5}>
                <Link href={objectsHref(repo, ref, parentOf(path))}>..</Link>
              </td>
            </tr>
          )}
          {listing.results.map((item) => (
            <ListingRow
              key={item.path}
              repo={repo}
              ref_={ref}
              dir={path}
              item={item}
              change={changes.get(item.path)}
              mark={uncommitted.get(item.path)}
              table={tables.has(item.path)}
            />
          ))}
          {removed.map((removedPath) => (
            <tr key={`removed-${removedPath}`} class="removed-row" data-testid="removed-entry">
              <td colSpan={5}>
                <s>{removedPath.slice(path.length)}</s> <ChangeMark change="removed" />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {listing.results.length === 0 && removed.length === 0 && <p class="empty">This directory is empty.</p>}
      {listing.results.length > BLAME_ROWS && <p class="note">Last changes are shown for the first {BLAME_ROWS} entries.</p>}
      <p class="table-footer">
        <span data-testid="page-info">
          Page {page}: {listing.results.length} entries{more ? ", more on the next page" : ""}
        </span>
        {props.after !== "" && <Link href={objectsHref(repo, ref, path)}>First page</Link>}
        {more && (
          <Link href={objectsHref(repo, ref, path, next, page + 1)} data-testid="next-page">
            Next page
          </Link>
        )}
      </p>
      {readme && <DirectoryReadme repo={repo} ref={ref} item={readme} />}
    </div>
  );
}

export function ObjectPage({ repo, query }: { repo: string; query: URLSearchParams }) {
  const ref = useRef(repo, query.get("ref"));
  if (ref.loading) return <Loading what="ref" />;
  if (ref.error || !ref.data) return <ErrorPage error={ref.error} />;
  return <ObjectDetails repo={repo} ref_={ref.data} path={query.get("path") ?? ""} />;
}

function ObjectDetails({ repo, ref_: ref, path }: { repo: string; ref_: string; path: string }) {
  const admin = useIsAdmin();
  const branch = useIsBranch(repo, ref) === true;
  // A branch whose protection refuses direct writes offers no Delete: it says why instead.
  const protectedBy = useWriteProtection(repo, branch ? ref : "");
  const [deleting, setDeleting] = useState(false);
  const stat = useAsync(
    (signal) => api.get<ObjectStats>(`${objectUrlPath(repo, ref)}/stat`, { path, user_metadata: true }, signal),
    [repo, ref, path],
  );
  const url = apiUrl(objectUrlPath(repo, ref), { path });
  const name = path.slice(path.lastIndexOf("/") + 1);
  const last = useAsync((signal) => lastChange(repo, ref, path, signal), [repo, ref, path]);
  return (
    <section class="object">
      <div class="toolbar">
        <RefPicker repo={repo} current={ref} onSelect={(next) => navigate(objectHref(repo, next, path))} />
        <Breadcrumbs repo={repo} ref={ref} path={path} />
      </div>
      {stat.loading && <Loading what="object" />}
      {stat.error !== undefined && <ErrorPage error={stat.error} />}
      {stat.data && (
        <>
          <div class="toolbar">
            <h2 class="object-name" data-testid="object-name">
              {name}
            </h2>
            {["parquet", "csv"].includes(previewKind(path, stat.data.content_type ?? "")) && (
              <Link href={queryHref(repo, ref, path)} class="button" data-testid="query-object">
                Query
              </Link>
            )}
            <a href={url} download={name} class="button" data-testid="download">
              Download
            </a>
            <Link href={objectHistoryHref(repo, ref, path)} class="button" data-testid="history-link">
              History
            </Link>
            <CopyUris repo={repo} ref={ref} path={path} />
            {!branch && (
              <span class="read-only-badge" data-testid="read-only">
                read-only
              </span>
            )}
            {branch && protectedBy.length === 0 && (
              <button type="button" class="danger" onClick={() => setDeleting(true)}>
                Delete
              </button>
            )}
            {branch && protectedBy.length > 0 && <ProtectedBadge repo={repo} branch={ref} patterns={protectedBy} refuses="deletes" />}
          </div>
          <table class="details" data-testid="object-details">
            <tbody>
              <tr>
                <th>Path</th>
                <td>
                  <code>{stat.data.path}</code>
                </td>
              </tr>
              <tr>
                <th>Size</th>
                <td>
                  {formatBytes(stat.data.size_bytes ?? 0)} ({stat.data.size_bytes ?? 0} bytes)
                </td>
              </tr>
              <tr>
                <th>Checksum</th>
                <td>
                  <code>{stat.data.checksum}</code>
                </td>
              </tr>
              <tr>
                <th>Last change</th>
                <td data-testid="last-change">
                  {last.loading ? "…" : <LastChangeCell repo={repo} commit={last.data ?? null} full />}
                </td>
              </tr>
              <tr>
                <th>Content type</th>
                <td>{stat.data.content_type}</td>
              </tr>
              <tr>
                <th>Modified</th>
                <td>{formatTime(stat.data.mtime)}</td>
              </tr>
              {admin && stat.data.physical_address && (
                <tr>
                  <th>Physical address</th>
                  <td>
                    <code>{stat.data.physical_address}</code>
                  </td>
                </tr>
              )}
              {Object.entries(stat.data.metadata ?? {}).map(([key, value]) => (
                <tr key={key}>
                  <th>
                    metadata <code>{key}</code>
                  </th>
                  <td>{value}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <h3>Preview</h3>
          <Preview repo={repo} ref={ref} path={path} size={stat.data.size_bytes ?? 0} contentType={stat.data.content_type ?? ""} url={url} />
        </>
      )}
      {deleting && protectedBy.length === 0 && (
        <ConfirmDialog
          title={`Delete ${name}?`}
          confirmLabel="Delete object"
          onConfirm={async () => {
            await api.del(`/repositories/${seg(repo)}/branches/${seg(ref)}/objects`, { path });
            navigate(objectsHref(repo, ref, parentOf(path)), true);
          }}
          onClose={() => setDeleting(false)}
        >
          <p>
            Deletes <code>{path}</code> from branch {ref} (an uncommitted change until the next commit).
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

/** The last commit that changed an entry: who, when, and its message (in full on an object's page). */
function LastChangeCell({ repo, commit, full = false }: { repo: string; commit: LastChange | undefined; full?: boolean }) {
  if (commit === undefined) return null;
  if (commit === null) return <span class="muted">no commit</span>;
  if (commit === OLDER) {
    return (
      <span class="muted" title="The lookup reads a bounded part of the log; the path's history page goes further back.">
        older than the commits searched
      </span>
    );
  }
  return (
    <span class="last-change" title={commit.message}>
      <Link href={commitHref(repo, commit.id)}>
        <code>{shortId(commit.id).slice(0, 8)}</code>
      </Link>{" "}
      {commit.committer}, {formatTime(commit.creation_date)}
      : {full || commit.message.length <= 40 ? commit.message : `${commit.message.slice(0, 40)}…`}
    </span>
  );
}
