// Paths and URLs of the object browser: directories are prefixes ending in "/", the root is "".
import { repoHref } from "../components/layout";

/** The UI URL of a directory listing; `after` and `page` locate a page past the first. */
export function objectsHref(repo: string, ref: string, path: string, after?: string, page?: number): string {
  return repoHref(repo, "objects", { ref, path: path || undefined, after, page: page && page > 1 ? String(page) : undefined });
}

/** The UI URL of one object's page. */
export function objectHref(repo: string, ref: string, path: string): string {
  return repoHref(repo, "object", { ref, path });
}

/** The directory holding a path ("a/b/c.csv" -> "a/b/"). */
export function parentOf(path: string): string {
  const trimmed = path.endsWith("/") ? path.slice(0, -1) : path;
  const slash = trimmed.lastIndexOf("/");
  return slash < 0 ? "" : trimmed.slice(0, slash + 1);
}

export interface Crumb {
  name: string;
  /** The directory this crumb lists ("a/b/"). */
  prefix: string;
  /** False for the object a path ends with: shown, not linked. */
  link: boolean;
}

/** The breadcrumbs after the repository's own: one per directory of `path`, then its object. */
export function crumbs(path: string): Crumb[] {
  const parts = path.split("/").filter(Boolean);
  const isDirectory = path === "" || path.endsWith("/");
  return parts.map((name, index) => ({
    name,
    prefix: parts.slice(0, index + 1).join("/") + "/",
    link: isDirectory || index < parts.length - 1,
  }));
}
