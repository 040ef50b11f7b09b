// The administration pages' frame: their navigation, and a gate that asks the API first, so a
// user who may not administer sees the API's 403 as a "Not allowed" page and nothing else.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { ErrorNote, ErrorPage, Loading } from "../../../components/error_page";
import { href, Link } from "../../../components/router";
import { useAsync } from "../../../components/use_async";

export type AdminSection = "users" | "groups" | "policies";

const SECTIONS: { section: AdminSection; label: string }[] = [
  { section: "users", label: "Users" },
  { section: "groups", label: "Groups" },
  { section: "policies", label: "Policies" },
];

export function adminHref(section: AdminSection, id?: string): string {
  return href(`/admin/${section}` + (id === undefined ? "" : `/${encodeURIComponent(id)}`));
}

/** Renders `children` once `probe` (a read the page needs anyway) succeeded; its failure is the page. */
export function AdminFrame(props: {
  section: AdminSection;
  probe: (signal: AbortSignal) => Promise<unknown>;
  probeKey: string;
  children: ComponentChildren;
}) {
  const probe = useAsync(props.probe, [props.probeKey]);
  return (
    <div class="admin" data-testid="admin-page">
      <h1>Administration</h1>
      <nav class="tabs" aria-label="administration">
        {SECTIONS.map(({ section, label }) => (
          <Link
            key={section}
            href={adminHref(section)}
            class={section === props.section ? "tab active" : "tab"}
            aria-current={section === props.section ? "page" : undefined}
          >
            {label}
          </Link>
        ))}
      </nav>
      <section class="tab-body">
        {probe.error ? <ErrorPage error={probe.error} /> : probe.loading && probe.data === undefined ? <Loading /> : props.children}
      </section>
    </div>
  );
}

export interface Field {
  name: string;
  label: string;
  optional?: boolean;
}

/** A one-line form ("Create user", "Add to group"): runs `onSubmit` with the trimmed values. */
export function InlineForm(props: {
  fields: Field[];
  button: string;
  onSubmit: (values: Record<string, string>) => Promise<void>;
  testId: string;
}) {
  const blank = () => Object.fromEntries(props.fields.map((field) => [field.name, ""]));
  const [values, setValues] = useState<Record<string, string>>(blank);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await props.onSubmit(Object.fromEntries(Object.entries(values).map(([name, value]) => [name, value.trim()])));
      setValues(blank());
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="inline-form" onSubmit={(event) => void submit(event)} data-testid={props.testId}>
      {props.fields.map((field) => (
        <label key={field.name}>
          {field.label}
          <input
            name={field.name}
            required={!field.optional}
            autoComplete="off"
            value={values[field.name]}
            onInput={(e) => setValues({ ...values, [field.name]: e.currentTarget.value })}
          />
        </label>
      ))}
      <button type="submit" class="primary" disabled={busy}>
        {props.button}
      </button>
      <ErrorNote error={error} />
    </form>
  );
}
