// The REST API's shapes the refs pages read (lakeFS's models), and the calls several pages share.
import { api, seg } from "../../api";
import { href } from "../../components/router";

export interface Commit {
  id: string;
  parents: string[];
  committer: string;
  message: string;
  creation_date: number;
  metadata?: Record<string, string> | null;
}

/** A branch or a tag: its name and the commit it points at. */
export interface NamedRef {
  id: string;
  commit_id: string;
}

export interface DiffRow {
  type: "added" | "removed" | "changed" | "prefix_changed";
  path: string;
  path_type: "object" | "common_prefix";
  size_bytes?: number | null;
}

interface Repository {
  id: string;
  default_branch: string;
}

/** How many rows a refs page asks for at a time. */
export const PAGE_SIZE = 50;

export function repoPath(repo: string): string {
  return `/repositories/${seg(repo)}`;
}

export function getCommit(repo: string, ref: string, signal?: AbortSignal): Promise<Commit> {
  return api.get<Commit>(`${repoPath(repo)}/commits/${seg(ref)}`, undefined, signal);
}

/** The ref a page shows: the one in the URL, else the repository's default branch. */
export async function refOrDefault(repo: string, ref: string | null, signal?: AbortSignal): Promise<string> {
  if (ref) return ref;
  const info = await api.get<Repository>(repoPath(repo), undefined, signal);
  return info.default_branch;
}

/** A commit id as people read it. */
export function shortId(id: string): string {
  return id.slice(0, 12);
}

/** The UI URL of a commit's page. */
export function commitHref(repo: string, id: string): string {
  return href(`/repositories/${encodeURIComponent(repo)}/commits/${encodeURIComponent(id)}`);
}
