// Opening a pull request: source and destination branches (picked from the repository's
// branches, or typed), a title and a description. The new pull request's page opens on success.
import { useState } from "preact/hooks";
import { allPages, seg } from "../../api";
import { ErrorNote } from "../../components/error_page";
import { href, navigate } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { type Branch, pullsApi } from "./pulls_api";
import { pullPath } from "./pulls_list";

// The pickers offer the first branches by name; any other branch can be typed.
const OFFERED_BRANCHES = 1000;

export function CreatePullPage({ repo, source, destination }: { repo: string; source: string; destination: string }) {
  const branches = useAsync(
    () => allPages<Branch>(`/repositories/${seg(repo)}/branches`, {}, OFFERED_BRANCHES),
    [repo],
  );
  const [form, setForm] = useState({ source_branch: source, destination_branch: destination, title: "", description: "" });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const set = (name: keyof typeof form) => (event: { currentTarget: { value: string } }) =>
    setForm({ ...form, [name]: event.currentTarget.value });
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const created = await pullsApi.create(repo, { ...form, title: form.title.trim() });
      navigate(href(pullPath(repo, created.id)));
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };
  return (
    <section class="pull-create" data-testid="pull-create-page">
      <h2>New pull request</h2>
      <form class="card" onSubmit={(event) => void submit(event)} data-testid="pull-create-form">
        <datalist id="branch-names">
          {(branches.data ?? []).map((b) => (
            <option key={b.id} value={b.id} />
          ))}
        </datalist>
        <ErrorNote error={branches.error} />
        <div class="row">
          <label>
            Source branch
            <input name="source_branch" list="branch-names" required autoComplete="off" value={form.source_branch} onInput={set("source_branch")} />
          </label>
          <span class="arrow" aria-hidden="true">→</span>
          <label>
            Destination branch
            <input name="destination_branch" list="branch-names" required autoComplete="off" value={form.destination_branch} onInput={set("destination_branch")} />
          </label>
        </div>
        <label>
          Title
          <input name="title" required maxLength={1024} value={form.title} onInput={set("title")} />
        </label>
        <label>
          Description
          <textarea name="description" rows={6} value={form.description} onInput={set("description")} />
        </label>
        <ErrorNote error={error} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy} data-testid="pull-create-submit">
            Open pull request
          </button>
        </div>
      </form>
    </section>
  );
}
