// Garbage-collection rules of a repository: how many days commits stay retained by default,
// and per branch. No rules at all is a state of its own (the API answers 404), shown as such.
import { useEffect, useState } from "preact/hooks";
import { ApiError, api, seg } from "../../api";
import { ErrorNote, Loading } from "../../components/error_page";

interface BranchRetention {
  branch_id: string;
  retention_days: number;
}

interface GcRules {
  default_retention_days: number;
  branches: BranchRetention[];
}

const MAX_DAYS = 36500;

const path = (repo: string) => `/repositories/${seg(repo)}/settings/gc_rules`;

export function GcSettings({ repo }: { repo: string }) {
  const [rules, setRules] = useState<GcRules | null>(null);
  const [exists, setExists] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [status, setStatus] = useState("");
  const [busy, setBusy] = useState(false);
  const [generation, setGeneration] = useState(0);

  useEffect(() => {
    const controller = new AbortController();
    setRules(null);
    api.get<GcRules>(path(repo), undefined, controller.signal).then(
      (read) => {
        setRules({ default_retention_days: read.default_retention_days, branches: read.branches ?? [] });
        setExists(true);
      },
      (failure: unknown) => {
        if (controller.signal.aborted) return;
        if (failure instanceof ApiError && failure.status === 404) {
          setRules({ default_retention_days: 21, branches: [] });
          setExists(false);
        } else {
          setError(failure);
        }
      },
    );
    return () => controller.abort();
  }, [repo, generation]);

  if (rules === null) return error ? <ErrorNote error={error} /> : <Loading what="GC rules" />;

  const days = (value: string) => Math.max(0, Math.min(MAX_DAYS, Math.floor(Number(value) || 0)));
  const setBranch = (index: number, update: Partial<BranchRetention>) => {
    setStatus("");
    setRules({ ...rules, branches: rules.branches.map((b, i) => (i === index ? { ...b, ...update } : b)) });
  };
  const run = async (action: () => Promise<unknown>, done: string) => {
    setBusy(true);
    setError(undefined);
    setStatus("");
    try {
      await action();
      setStatus(done);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  const save = (event: Event) => {
    event.preventDefault();
    const body = { ...rules, branches: rules.branches.map((b) => ({ ...b, branch_id: b.branch_id.trim() })) };
    void run(async () => {
      await api.put(path(repo), body);
      setExists(true);
    }, "Saved.");
  };
  const remove = () =>
    run(async () => {
      await api.del(path(repo));
      setGeneration((n) => n + 1);
    }, "Rules removed: nothing is collected by rule.");
  return (
    <form class="card gc-rules" onSubmit={save} data-testid="gc-form">
      <h3>Garbage collection</h3>
      <p class="hint">
        {exists
          ? "Commits older than their branch's retention are collected by the next GC run."
          : "No GC rules are set for this repository: save some to enable collection."}
      </p>
      <label>
        Default retention (days)
        <input
          type="number"
          name="default_retention_days"
          min={0}
          max={MAX_DAYS}
          required
          value={rules.default_retention_days}
          onInput={(e) => setRules({ ...rules, default_retention_days: days(e.currentTarget.value) })}
        />
      </label>
      <table>
        <thead>
          <tr>
            <th>Branch</th>
            <th>Retention (days)</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {rules.branches.map((branch, index) => (
            <tr key={index} data-testid="gc-branch">
              <td>
                <input name="branch_id" aria-label="branch" required value={branch.branch_id} onInput={(e) => setBranch(index, { branch_id: e.currentTarget.value })} />
              </td>
              <td>
                <input
                  type="number"
                  name="retention_days"
                  aria-label="retention days"
                  min={0}
                  max={MAX_DAYS}
                  value={branch.retention_days}
                  onInput={(e) => setBranch(index, { retention_days: days(e.currentTarget.value) })}
                />
              </td>
              <td>
                <button type="button" onClick={() => setRules({ ...rules, branches: rules.branches.filter((_, i) => i !== index) })}>
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <ErrorNote error={error} />
      {status && (
        <p class="saved" role="status" data-testid="gc-status">
          {status}
        </p>
      )}
      <div class="actions">
        <button
          type="button"
          onClick={() => setRules({ ...rules, branches: [...rules.branches, { branch_id: "", retention_days: rules.default_retention_days }] })}
          data-testid="add-gc-branch"
        >
          Add branch rule
        </button>
        {exists && (
          <button type="button" class="danger" disabled={busy} onClick={() => void remove()} data-testid="delete-gc">
            Remove all rules
          </button>
        )}
        <button type="submit" class="primary" disabled={busy} data-testid="save-gc">
          Save GC rules
        </button>
      </div>
    </form>
  );
}
