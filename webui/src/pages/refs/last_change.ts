// "Blame" for a data lake: the last commit that changed a path (an object, or anything under a
// directory), from the log filtered by that path. A listing asks for its first rows only, a few
// at a time, so a page of 1,000 entries never sends 1,000 log walks.
import { useEffect, useState } from "preact/hooks";
import { type Page, api, seg } from "../../api";
import { type Commit, repoPath } from "./model";

/** Entries of a listing page whose last change is looked up. */
export const BLAME_ROWS = 100;
/** Log calls in flight at once for a listing. */
const BLAME_CONCURRENCY = 4;
/** How often answers of a listing's lookups are shown. */
const FLUSH_MS = 250;
/** A log walk answers within bounded work and may need another call; at most this many per path. */
const MAX_LOG_CALLS = 3;

/** What a bounded lookup found: the commit, null when no commit of the ref changed the path, or
 * OLDER when the log calls ran out first (the change is further back than they looked). */
export const OLDER = "older";
export type LastChange = Commit | null | typeof OLDER;

/** The newest commit of `ref` that changed path (a directory when it ends with "/"). */
export async function lastChange(repo: string, ref: string, path: string, signal?: AbortSignal): Promise<LastChange> {
  const filter = path.endsWith("/") ? { prefixes: path } : { objects: path };
  let after = "";
  for (let call = 0; call < MAX_LOG_CALLS; call++) {
    const page = await api.page<Commit>(`${repoPath(repo)}/refs/${seg(ref)}/commits`, filter, after, 1, signal);
    if (page.results.length > 0) return page.results[0];
    if (!page.pagination.has_more) return null;
    after = page.pagination.next_offset;
  }
  // Not "no commit": the log has more, this lookup stopped looking.
  return OLDER;
}

/** One page of the commits of `ref` that changed path. */
export function pathHistory(repo: string, ref: string, path: string, after: string, amount: number, signal: AbortSignal): Promise<Page<Commit>> {
  const filter = path.endsWith("/") ? { prefixes: path } : { objects: path };
  return api.page<Commit>(`${repoPath(repo)}/refs/${seg(ref)}/commits`, filter, after, amount, signal);
}

/** Last changes of the first BLAME_ROWS paths, filled in as they arrive (undefined: not yet or
 * not looked up; null: no commit changed it; OLDER: further back than the lookup). */
export function useLastChanges(repo: string, ref: string, paths: string[]): Map<string, LastChange> {
  const [found, setFound] = useState<Map<string, LastChange>>(new Map());
  const key = paths.slice(0, BLAME_ROWS).join("\u0000");
  useEffect(() => {
    const controller = new AbortController();
    setFound(new Map());
    const queue = paths.slice(0, BLAME_ROWS);
    // Answers are shown in batches: each update renders the listing again (its rows skip what
    // did not change, but the page's own work is per update), so one per answer would cost a
    // hundred renders.
    const ready = new Map<string, LastChange>();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const flush = () => {
      timer = undefined;
      if (!controller.signal.aborted) setFound(new Map(ready));
    };
    const worker = async () => {
      for (let path = queue.shift(); path !== undefined && !controller.signal.aborted; path = queue.shift()) {
        const current = path;
        try {
          ready.set(current, await lastChange(repo, ref, current, controller.signal));
          timer ??= setTimeout(flush, FLUSH_MS);
        } catch {
          // A path whose history cannot be read shows no last change; the listing still works.
        }
      }
    };
    void Promise.all(Array.from({ length: BLAME_CONCURRENCY }, worker)).then(() => {
      clearTimeout(timer);
      flush();
    });
    return () => {
      controller.abort();
      clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [repo, ref, key]);
  return found;
}
