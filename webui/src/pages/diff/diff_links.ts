// Links to an object's diff page from the lists of changed paths: the refs a diff list compares
// are read from its API path, so every list (a commit, two refs, a branch's changes) links the
// same way.
import { repoHref } from "../../components/layout";

export type DiffType = "two_dot" | "three_dot";

export interface DiffRefs {
  left: string;
  right: string;
  /** three_dot: what `right` changed since it left `left` (their merge base against right). */
  type: DiffType;
}

const REFS_DIFF = /^\/repositories\/[^/]+\/refs\/([^/]+)\/diff\/([^/]+)$/;
const BRANCH_DIFF = /^\/repositories\/[^/]+\/branches\/([^/]+)\/diff$/;

/** The two refs a diff list's API path compares (its `type`, lakeFS's default three_dot), or
 * null for a path of another shape. A branch's uncommitted changes compare its last commit
 * (`branch@`) with the branch as staged. */
export function diffRefsOf(apiPath: string, type?: string): DiffRefs | null {
  const refs = REFS_DIFF.exec(apiPath);
  if (refs) return { left: decodeURIComponent(refs[1]), right: decodeURIComponent(refs[2]), type: type === "two_dot" ? "two_dot" : "three_dot" };
  const branch = BRANCH_DIFF.exec(apiPath);
  if (branch) {
    const name = decodeURIComponent(branch[1]);
    return { left: `${name}@`, right: name, type: "two_dot" };
  }
  return null;
}

/** The UI URL of one object's diff between two refs (two_dot, the default, left out). */
/** How a table diff pairs rows without a key column: a detected key, else their content
 * ("auto", the API's default), their content, or their position. */
export type RowMatch = "auto" | "content" | "position";

export function objectDiffHref(repo: string, left: string, right: string, path: string, type: DiffType = "two_dot", key?: string, match?: RowMatch): string {
  return repoHref(repo, "diff", { left, right, path, type: type === "three_dot" ? type : undefined, key, match: match && match !== "auto" ? match : undefined });
}

/** The UI URL of the query page of an object. */
export function queryHref(repo: string, ref: string, path: string): string {
  return repoHref(repo, "query", { ref, path });
}

const LANGUAGES: Record<string, string> = {
  py: "python",
  js: "javascript",
  mjs: "javascript",
  ts: "typescript",
  tsx: "typescript",
  json: "json",
  jsonl: "json",
  ndjson: "json",
  yaml: "yaml",
  yml: "yaml",
  toml: "toml",
  ini: "ini",
  cfg: "ini",
  sql: "sql",
  sh: "shell",
  md: "markdown",
  markdown: "markdown",
  html: "html",
  htm: "html",
  xml: "xml",
  css: "css",
  go: "go",
  rs: "rust",
  java: "java",
  c: "c",
  h: "c",
  r: "r",
};

/** The language class of a path by its extension ("plain" when none is known). */
export function languageOf(path: string): string {
  const name = path.slice(path.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  return (dot < 0 ? undefined : LANGUAGES[name.slice(dot + 1).toLowerCase()]) ?? "plain";
}

const COMMENT_PREFIX: Record<string, string[]> = {
  python: ["#"],
  shell: ["#"],
  yaml: ["#"],
  toml: ["#"],
  ini: ["#", ";"],
  r: ["#"],
  sql: ["--"],
  javascript: ["//"],
  typescript: ["//"],
  go: ["//"],
  rust: ["//"],
  java: ["//"],
  c: ["//"],
  css: ["/*"],
};

/** Whether a line of this language is a whole-line comment (shown muted). */
export function isComment(language: string, line: string): boolean {
  const trimmed = line.trimStart();
  return (COMMENT_PREFIX[language] ?? []).some((prefix) => trimmed.startsWith(prefix));
}

/** A ref as shown: a commit id cut to its first 12 characters, any other name as it is. */
export function shortRef(ref: string): string {
  return /^[0-9a-f]{40,64}$/.test(ref) ? ref.slice(0, 12) : ref;
}
