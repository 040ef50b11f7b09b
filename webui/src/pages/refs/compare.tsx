// Compare two refs: what the compared ref adds, changes and removes relative to the base
// (three-dot, as a merge would see it), and merging it into the base branch with a strategy;
// conflicts are listed path by path.
import { useState } from "preact/hooks";
import { seg } from "../../api";
import { ErrorNote, ErrorPage, Loading } from "../../components/error_page";
import { repoHref } from "../../components/layout";
import { RefPicker } from "../../components/ref_picker";
import { Link, navigate } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { DiffTree } from "./diff_tree";
import { type Conflict, type MergeOutcome, type Strategy, type TableConflict, checkMerge, mergeRefs, nothingToMerge } from "./merge";
import { commitHref, refOrDefault, repoPath, shortId } from "./model";
import { TableChanges } from "./table_changes";

export function ComparePage({ repo, query }: { repo: string; query: URLSearchParams }) {
  const base = useAsync((signal) => refOrDefault(repo, query.get("base"), signal), [repo, query.get("base")]);
  const compare = query.get("compare") ?? "";
  if (base.error) return <ErrorPage error={base.error} />;
  if (!base.data) return <Loading what="refs" />;
  const baseRef = base.data;
  const go = (next: { base: string; compare: string }) => navigate(repoHref(repo, "compare", next));
  return (
    <div class="refs-page" data-testid="compare-page">
      <div class="toolbar compare-pickers">
        <span data-testid="base-picker">
          Base <RefPicker repo={repo} current={baseRef} onSelect={(ref) => go({ base: ref, compare })} />
        </span>
        <span>←</span>
        <span data-testid="compare-picker">
          Compared <RefPicker repo={repo} current={compare || "(choose)"} onSelect={(ref) => go({ base: baseRef, compare: ref })} />
        </span>
      </div>
      {compare ? (
        <Comparison key={`${baseRef}\u0000${compare}`} repo={repo} base={baseRef} compare={compare} />
      ) : (
        <p class="empty">Choose a ref to compare with {baseRef}.</p>
      )}
    </div>
  );
}

function Comparison({ repo, base, compare }: { repo: string; base: string; compare: string }) {
  const [generation, setGeneration] = useState(0);
  return (
    <>
      <MergeForm repo={repo} base={base} compare={compare} generation={generation} onMerged={() => setGeneration((n) => n + 1)} />
      <TableChanges repo={repo} base={base} compare={compare} resetKey={String(generation)} />
      <h2>
        Changes of {compare} relative to {base}
      </h2>
      <DiffTree
        path={`${repoPath(repo)}/refs/${seg(base)}/diff/${seg(compare)}/summary`}
        repo={repo}
        diffRefs={{ left: base, right: compare, type: "three_dot" }}
        resetKey={String(generation)}
        empty="No differences."
        testId="compare-diff"
      />
    </>
  );
}

function MergeForm(props: { repo: string; base: string; compare: string; generation: number; onMerged: () => void }) {
  // Asked again after each merge here; a failed check leaves Merge offered (the API decides).
  const check = useAsync(
    (signal) => checkMerge(props.repo, props.compare, props.base, signal).catch(() => null),
    [props.repo, props.compare, props.base, props.generation],
  );
  const empty = check.data ? nothingToMerge(check.data) : false;
  const [strategy, setStrategy] = useState<Strategy>("");
  const [message, setMessage] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [outcome, setOutcome] = useState<MergeOutcome | null>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    setOutcome(null);
    try {
      const result = await mergeRefs(props.repo, props.compare, props.base, strategy, message.trim());
      setOutcome(result);
      if (result.kind === "merged") props.onMerged();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card merge-form" onSubmit={(event) => void submit(event)} data-testid="merge-form">
      <h2>
        Merge {props.compare} into {props.base}
      </h2>
      <label>
        Strategy
        <select value={strategy} onChange={(e) => setStrategy(e.currentTarget.value as Strategy)}>
          <option value="">none (a conflict stops the merge)</option>
          <option value="dest-wins">dest-wins ({props.base} wins conflicts)</option>
          <option value="source-wins">source-wins ({props.compare} wins conflicts)</option>
        </select>
      </label>
      <label>
        Merge message
        <input value={message} maxLength={4096} placeholder={`Merge '${props.compare}' into '${props.base}'`} onInput={(e) => setMessage(e.currentTarget.value)} />
      </label>
      <ErrorNote error={error} repo={props.repo} />
      {empty && outcome === null && (
        <p class="note" role="status" id="nothing-to-merge" data-testid="nothing-to-merge">
          Nothing to merge: {props.compare} is already in {props.base}.
        </p>
      )}
      <div class="actions">
        <button type="submit" class="primary" disabled={busy || empty} aria-describedby={empty ? "nothing-to-merge" : undefined}>
          Merge
        </button>
      </div>
      {outcome?.kind === "merged" && (
        <p class="note" role="status" data-testid="merged">
          Merged: <Link href={commitHref(props.repo, outcome.commitId)}>{shortId(outcome.commitId)}</Link>
        </p>
      )}
      {outcome?.kind === "conflicts" && <Conflicts outcome={outcome} base={props.base} compare={props.compare} />}
    </form>
  );
}

function Conflicts(props: { outcome: Extract<MergeOutcome, { kind: "conflicts" }>; base: string; compare: string }) {
  const { conflicts, truncated, tables } = props.outcome;
  return (
    <div class="conflicts" role="alert" data-testid="conflicts">
      <h3>Merge stopped: conflicts</h3>
      <p>
        Both sides changed these paths since they diverged. Nothing was merged; choose a strategy to let one side win, or
        resolve them on a branch.
      </p>
      {conflicts.length === 0 ? <p class="error-note">{props.outcome.message}</p> : <ConflictTable conflicts={conflicts} tables={tables} base={props.base} compare={props.compare} />}
      {truncated && <p class="note">More conflicts were not examined.</p>}
    </div>
  );
}

/** Conflicting paths, with what each side did to each since they diverged. */
export function ConflictTable(props: { conflicts: readonly Conflict[]; tables?: readonly TableConflict[]; base: string; compare: string }) {
  return (
    <table>
      <thead>
        <tr>
          <th>Path</th>
          <th>{props.compare}</th>
          <th>{props.base}</th>
        </tr>
      </thead>
      <tbody>
        {props.conflicts.map((conflict: Conflict) => {
          const table = tableOfPointer(conflict.path, props.tables ?? []);
          return (
            <tr key={conflict.path} data-testid="conflict-row">
              <td>
                <code>{conflict.path}</code>
                {table && (
                  <p class="note" data-testid="table-conflict">
                    Iceberg table {table.table}: {table.reason}
                  </p>
                )}
              </td>
              <td>{conflict.source}</td>
              <td>{conflict.destination}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** The table whose pointer (`<namespace>/<table>/_iceberg_table.json`) is at path, if any. */
export function tableOfPointer(path: string, tables: readonly TableConflict[]): TableConflict | undefined {
  return tables.find((table) => `${table.table.split(".").join("/")}/_iceberg_table.json` === path);
}
