// Choosing a user, group or policy from the API's list instead of typing its id: a search box
// (the list's prefix filter, asked as one types), the matches as options, and the button that
// acts on the one chosen. Only an id the list offered can be submitted.
import { useEffect, useState } from "preact/hooks";
import type { Page } from "../../../api";
import { ErrorNote } from "../../../components/error_page";

// What one search shows at most: enough to pick from, small enough to read.
const SHOWN = 20;
// Typing pauses this long before the list is asked.
const SEARCH_DELAY_MS = 150;
const MAX_QUERY = 128;

export function IdPicker(props: {
  testId: string;
  /** The kind chosen ("Policy", "User", "Group"): the search box's label. */
  label: string;
  button: string;
  search: (prefix: string, signal: AbortSignal) => Promise<Page<{ id: string }>>;
  /** Ids not to offer (already attached, the page's own). */
  exclude?: (id: string) => boolean;
  onChoose: (id: string) => Promise<void>;
}) {
  const [query, setQuery] = useState("");
  const [options, setOptions] = useState<string[]>([]);
  const [chosen, setChosen] = useState<string | null>(null);
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [version, setVersion] = useState(0);

  useEffect(() => {
    if (!open) return;
    const controller = new AbortController();
    const timer = setTimeout(() => {
      props.search(query.trim(), controller.signal).then(
        (page) => {
          const ids = page.results.map((row) => row.id).filter((id) => !props.exclude?.(id));
          setOptions(ids.slice(0, SHOWN));
          setError(undefined);
        },
        (failure: unknown) => {
          if (!controller.signal.aborted) setError(failure);
        },
      );
    }, SEARCH_DELAY_MS);
    return () => {
      clearTimeout(timer);
      controller.abort();
    };
    // props.search is a new function every render; the query, openness and version decide.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [query, open, version]);

  const choose = async () => {
    if (chosen === null) return;
    setBusy(true);
    setError(undefined);
    try {
      await props.onChoose(chosen);
      setChosen(null);
      setQuery("");
      setVersion((n) => n + 1);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const listId = `${props.testId}-options`;
  const listed = open && chosen === null && options.length > 0;
  return (
    <div class="id-picker" data-testid={props.testId}>
      <label>
        {props.label}
        <input
          type="search"
          aria-autocomplete="list"
          // Only while the list is there: a reference to a missing element is invalid ARIA.
          aria-controls={listed ? listId : undefined}
          autoComplete="off"
          placeholder={`Search ${plural(props.label.toLowerCase())} by name`}
          maxLength={MAX_QUERY}
          value={chosen ?? query}
          onFocus={() => setOpen(true)}
          onInput={(e) => {
            setChosen(null);
            setQuery(e.currentTarget.value);
            setOpen(true);
          }}
        />
      </label>
      <button type="button" class="primary" disabled={busy || chosen === null} onClick={() => void choose()}>
        {props.button}
      </button>
      {listed && (
        <ul class="id-options" role="listbox" id={listId} aria-label={`${props.label}s`}>
          {options.map((id) => (
            <li key={id} role="option" aria-selected={false} tabIndex={0} onClick={() => setChosen(id)} onKeyDown={(e) => e.key === "Enter" && setChosen(id)}>
              {id}
            </li>
          ))}
        </ul>
      )}
      {open && chosen === null && options.length === 0 && <p class="hint id-options">No match.</p>}
      <ErrorNote error={error} />
    </div>
  );
}

/** A picker's noun in the plural ("policy" -> "policies", "user" -> "users"). */
export function plural(noun: string): string {
  return /[^aeiou]y$/.test(noun) ? `${noun.slice(0, -1)}ies` : `${noun}s`;
}
