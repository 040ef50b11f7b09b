// Picks a ref: a branch or tag by name (filtered by prefix, first 20 of each), or any commit
// id / ref expression typed in and confirmed with Enter.
import { useState } from "preact/hooks";
import { api, seg } from "../api";
import { ErrorNote } from "./error_page";
import { useAsync } from "./use_async";

const SHOWN = 20;

interface Named {
  id: string;
  commit_id: string;
}

export function RefPicker({ repo, current, onSelect }: { repo: string; current: string; onSelect: (ref: string) => void }) {
  const [open, setOpen] = useState(false);
  const [filter, setFilter] = useState("");
  const choose = (ref: string) => {
    setOpen(false);
    setFilter("");
    if (ref) onSelect(ref);
  };
  return (
    <div class="ref-picker" data-testid="ref-picker">
      <button type="button" class="ref-button" onClick={() => setOpen(!open)} aria-expanded={open}>
        ref: <strong>{current}</strong> ▾
      </button>
      {open && (
        <div class="ref-menu">
          <input
            autoFocus
            placeholder="branch, tag or commit id"
            aria-label="ref filter"
            value={filter}
            onInput={(event) => setFilter(event.currentTarget.value)}
            onKeyDown={(event) => {
              if (event.key === "Enter") choose(filter.trim());
              if (event.key === "Escape") setOpen(false);
            }}
          />
          <RefList repo={repo} kind="branches" filter={filter} onChoose={choose} />
          <RefList repo={repo} kind="tags" filter={filter} onChoose={choose} />
          {filter.trim() && (
            <button type="button" class="ref-choice" onClick={() => choose(filter.trim())}>
              Use commit / ref “{filter.trim()}”
            </button>
          )}
        </div>
      )}
    </div>
  );
}

function RefList(props: { repo: string; kind: "branches" | "tags"; filter: string; onChoose: (ref: string) => void }) {
  const names = useAsync(
    (signal) =>
      api.page<Named>(`/repositories/${seg(props.repo)}/${props.kind}`, { prefix: props.filter }, "", SHOWN, signal),
    [props.repo, props.kind, props.filter],
  );
  return (
    <div class="ref-group">
      <h4>{props.kind === "branches" ? "Branches" : "Tags"}</h4>
      <ErrorNote error={names.error} />
      {/* The previous filter's names stay out of sight while the new ones load. */}
      {!names.loading && names.data?.results.map((named) => (
        <button type="button" class="ref-choice" key={named.id} onClick={() => props.onChoose(named.id)}>
          {named.id}
        </button>
      ))}
      {!names.loading && names.data && names.data.results.length === 0 && <p class="empty">none</p>}
    </div>
  );
}
