// A directory's README.md rendered under its listing, as code hosts and lakeFS show one: the
// first 64 KiB (as an object's preview), through markdown.tsx, which never turns the object's
// text into markup (raw HTML stays text, links only to safe addresses).
import { ErrorNote } from "../components/error_page";
import { useAsync } from "../components/use_async";
import { Markdown } from "./markdown";
import type { ObjectStats } from "./objects";
import { firstBytes } from "./objects_preview";

const README = /^readme\.(md|markdown)$/i;

/** The listing's README document, if it has one: README.md before readme.md and the like. */
export function readmeOf(entries: ObjectStats[], directory: string): ObjectStats | undefined {
  const found = entries.filter((item) => item.path_type === "object" && README.test(item.path.slice(directory.length)));
  return found.find((item) => item.path.slice(directory.length) === "README.md") ?? found[0];
}

export function DirectoryReadme({ repo, ref, item }: { repo: string; ref: string; item: ObjectStats }) {
  const head = useAsync((signal) => firstBytes(repo, ref, item.path, item.size_bytes ?? 0, signal), [repo, ref, item.path, item.checksum]);
  const name = item.path.slice(item.path.lastIndexOf("/") + 1);
  return (
    <section class="directory-readme" data-testid="directory-readme" aria-label={name}>
      <h3>{name}</h3>
      {head.error !== undefined && <ErrorNote error={head.error} />}
      {head.data && <Markdown text={head.data.text} base={{ repo, ref, path: item.path }} />}
      {head.data?.truncated && <p class="note">The first 64 KiB are shown; open the object for the rest.</p>}
    </section>
  );
}
