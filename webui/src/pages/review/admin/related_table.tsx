// What a user's or a group's page shows of its relations (a group's members, a user's groups,
// the policies attached to either): a searchable list to add one from, and a paged table of
// links to them with a control that removes one.
import { useState } from "preact/hooks";
import type { Page } from "../../../api";
import { PagedTable } from "../../../components/paged_table";
import { Link } from "../../../components/router";
import { type AdminSection, adminHref } from "./admin_frame";
import { iamApi, type Policy } from "./iam_api";
import { IdPicker } from "./id_picker";

/** Runs an action of the page, then `after`; a failure goes to the page's one error note. */
export type PageAction = (action: () => Promise<unknown>, after: () => void) => Promise<void>;

/** The page's last failure and the runner that records it. */
export function usePageAction(): { error: unknown; run: PageAction } {
  const [error, setError] = useState<unknown>(undefined);
  const run: PageAction = async (action, after) => {
    setError(undefined);
    try {
      await action();
      after();
    } catch (failure) {
      setError(failure);
    }
  };
  return { error, run };
}

export function RelatedTable<T extends { id: string }>(props: {
  heading: string;
  /** The page's own id: the table starts over when it or the relations change. */
  ownerId: string;
  add: {
    testId: string;
    label: string;
    button: string;
    search: (prefix: string, signal: AbortSignal) => Promise<Page<{ id: string }>>;
    action: (id: string) => Promise<unknown>;
  };
  testId: string;
  load: (after: string, signal: AbortSignal) => Promise<Page<T>>;
  /** Where a row's link goes, and the column's title. */
  section: AdminSection;
  column: string;
  empty: string;
  remove: { testId: string; label: string; action: (id: string) => Promise<unknown> };
  run: PageAction;
}) {
  const [version, setVersion] = useState(0);
  const changed = () => setVersion((n) => n + 1);
  const { add, remove } = props;
  return (
    <>
      <h3>{props.heading}</h3>
      <IdPicker
        testId={add.testId}
        label={add.label}
        button={add.button}
        search={add.search}
        onChoose={async (id) => {
          await add.action(id);
          changed();
        }}
      />
      <PagedTable<T>
        testId={props.testId}
        resetKey={`${props.ownerId}/${version}`}
        load={props.load}
        rowKey={(row) => row.id}
        empty={props.empty}
        columns={[
          { title: props.column, cell: (row) => <Link href={adminHref(props.section, row.id)}>{row.id}</Link> },
          {
            title: "",
            cell: (row) => (
              <button
                type="button"
                onClick={() => void props.run(() => remove.action(row.id), changed)}
                data-testid={remove.testId}
              >
                {remove.label}
              </button>
            ),
          },
        ]}
      />
    </>
  );
}

/** The policies attached to a user or a group: the same on both pages but for the calls. */
export function AttachedPolicies(props: {
  heading: string;
  ownerId: string;
  formTestId: string;
  testId: string;
  load: (after: string, signal: AbortSignal) => Promise<Page<Policy>>;
  attach: (policyId: string) => Promise<unknown>;
  detach: (policyId: string) => Promise<unknown>;
  run: PageAction;
}) {
  return (
    <RelatedTable<Policy>
      heading={props.heading}
      ownerId={props.ownerId}
      add={{
        testId: props.formTestId,
        label: "Policy",
        search: (prefix, signal) => iamApi.policies("", signal, prefix),
        button: "Attach policy",
        action: props.attach,
      }}
      testId={props.testId}
      load={props.load}
      section="policies"
      column="Policy"
      empty="No policies attached."
      remove={{ testId: "detach-policy", label: "Detach", action: props.detach }}
      run={props.run}
    />
  );
}
