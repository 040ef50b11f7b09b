// Branch protection rules of a repository: a glob pattern over branch names, whether direct
// writes are forbidden, how many approvals a pull request needs to merge and which of its checks
// ("<action name>/<hook id>") must have passed. The whole list is saved at once with the ETag it
// was read with, so a concurrent change is refused (412) rather than overwritten.
import { useEffect, useState } from "preact/hooks";
import { ApiError, call, seg } from "../../api";
import { ErrorNote, Loading } from "../../components/error_page";
import { formatCheckList, parseCheckList } from "../actions/model";

export interface ProtectionRule {
  pattern: string;
  block_direct_writes: boolean;
  required_approvals: number;
  required_checks: string[];
}

/** A rule as the form edits it: the required checks as the comma-separated text typed. */
type RuleForm = Omit<ProtectionRule, "required_checks"> & { required_checks: string };

function toRule(form: RuleForm): ProtectionRule {
  return { ...form, pattern: form.pattern.trim(), required_checks: parseCheckList(form.required_checks) };
}

const MAX_RULES = 100;

const path = (repo: string) => `/repositories/${seg(repo)}/settings/branch_protection`;

async function readRules(repo: string, signal: AbortSignal): Promise<{ rules: RuleForm[]; etag: string }> {
  const response = await call(path(repo), { signal });
  const rules = (await response.json()) as Partial<ProtectionRule>[];
  return {
    etag: response.headers.get("ETag") ?? "",
    rules: rules.map((rule) => ({
      pattern: rule.pattern ?? "",
      // A lakeFS rule ({pattern} alone) blocks direct writes.
      block_direct_writes: rule.block_direct_writes ?? true,
      required_approvals: rule.required_approvals ?? 0,
      required_checks: formatCheckList(rule.required_checks),
    })),
  };
}

export function ProtectionSettings({ repo }: { repo: string }) {
  const [rules, setRules] = useState<RuleForm[] | null>(null);
  const [etag, setEtag] = useState("");
  const [error, setError] = useState<unknown>(undefined);
  const [saved, setSaved] = useState(false);
  const [busy, setBusy] = useState(false);
  const [generation, setGeneration] = useState(0);

  useEffect(() => {
    const controller = new AbortController();
    setRules(null);
    readRules(repo, controller.signal).then(
      (read) => {
        setRules(read.rules);
        setEtag(read.etag);
      },
      (failure: unknown) => {
        if (!controller.signal.aborted) setError(failure);
      },
    );
    return () => controller.abort();
  }, [repo, generation]);

  if (rules === null) return error ? <ErrorNote error={error} /> : <Loading what="branch protection" />;

  const change = (index: number, update: Partial<RuleForm>) => {
    setSaved(false);
    setRules(rules.map((rule, i) => (i === index ? { ...rule, ...update } : rule)));
  };
  const save = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    setSaved(false);
    try {
      const response = await call(path(repo), {
        method: "PUT",
        json: rules.map(toRule),
        headers: { "If-Match": etag },
      });
      setEtag(response.headers.get("ETag") ?? etag);
      setSaved(true);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card protection" onSubmit={(event) => void save(event)} data-testid="protection-form">
      <h3 id="branch-protection">Branch protection</h3>
      <p class="hint">
        A pattern matches branch names (<code>*</code> is the only wildcard). Forbidding direct writes refuses uploads,
        deletes, commits, resets and reverts on the branch through every client; changes then arrive by merge.
        Required approvals additionally refuse every merge but a pull request's with that many approvals.
        Required checks, a comma-separated list of check names (an action's name, a slash and a hook's id, as a pull
        request lists them), must all have passed on the pull request's source head before it merges.
      </p>
      <table>
        <thead>
          <tr>
            <th>Pattern</th>
            <th>Forbid direct writes</th>
            <th>Required approvals</th>
            <th>Required checks</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {rules.map((rule, index) => (
            <tr key={index} data-testid="protection-rule">
              <td>
                <input
                  name="pattern"
                  aria-label="pattern"
                  required
                  maxLength={256}
                  value={rule.pattern}
                  onInput={(e) => change(index, { pattern: e.currentTarget.value })}
                />
              </td>
              <td>
                <input
                  type="checkbox"
                  name="block_direct_writes"
                  aria-label="forbid direct writes"
                  checked={rule.block_direct_writes}
                  onChange={(e) => change(index, { block_direct_writes: e.currentTarget.checked })}
                />
              </td>
              <td>
                <input
                  type="number"
                  name="required_approvals"
                  aria-label="required approvals"
                  min={0}
                  max={100}
                  value={rule.required_approvals}
                  onInput={(e) => change(index, { required_approvals: Number(e.currentTarget.value) || 0 })}
                />
              </td>
              <td>
                <input
                  name="required_checks"
                  aria-label="required checks"
                  placeholder="Check/reject, Lint/schema"
                  maxLength={4096}
                  value={rule.required_checks}
                  onInput={(e) => change(index, { required_checks: e.currentTarget.value })}
                />
              </td>
              <td>
                <button type="button" onClick={() => setRules(rules.filter((_, i) => i !== index))} data-testid="remove-rule">
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {rules.length === 0 && <p class="empty">No branch is protected.</p>}
      <ErrorNote error={error} />
      {error instanceof ApiError && error.status === 412 && (
        <p class="hint" data-testid="changed-meanwhile">
          Someone saved other rules since this page read them. Discard changes to see theirs, then edit again.
        </p>
      )}
      {saved && (
        <p class="saved" role="status" data-testid="protection-saved">
          Saved.
        </p>
      )}
      <div class="actions">
        <button
          type="button"
          disabled={rules.length >= MAX_RULES}
          onClick={() => setRules([...rules, { pattern: "", block_direct_writes: true, required_approvals: 0, required_checks: "" }])}
          data-testid="add-rule"
        >
          Add rule
        </button>
        <button type="button" onClick={() => setGeneration((n) => n + 1)}>
          Discard changes
        </button>
        <button type="submit" class="primary" disabled={busy} data-testid="save-protection">
          Save rules
        </button>
      </div>
    </form>
  );
}
