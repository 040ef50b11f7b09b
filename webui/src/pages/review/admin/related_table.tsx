// What a user's or a group's page shows of its relations (a group's members, a user's groups,
// the policies attached to either): a searchable list to add one from, and a paged table of
// links to them with a control that removes one (none for a binding setup keeps: a badge says
// why instead).
import { useState } from "preact/hooks";
import type { Page } from "../../../api";
import { PagedTable } from "../../../components/paged_table";
import { Link } from "../../../components/router";
import { type AdminSection, adminHref } from "./admin_frame";
import { type Bound, iamApi, type Policy } from "./iam_api";
import { IdPicker } from "./id_picker";

// Why each kind of binding setup keeps stays (auth's own reasons, silt/iam_system.py).
export const KEPT_GROUP_POLICY =
  "Setup attaches this preset group's policy again at every start, so detaching it would silently come undone: to narrow the group, move its members to a group of your own or attach a policy with Deny statements to it.";
export const KEPT_MEMBER = "Setup puts this service user in the group again at every start, and Silt's services need it there: removing it would silently come undone.";
export const KEPT_USER_POLICY = "Setup attaches this policy to the service user again at every start, and Silt's services need it: detaching it would silently come undone.";

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

/** A binding setup makes again at every start, where a Remove or Detach would be: why it stays. */
export function KeptBadge({ why }: { why: string }) {
  return (
    <span class="system-badge" data-testid="kept-by-setup" title={why}>
      kept by the system
      <span class="visually-hidden">: {why}</span>
    </span>
  );
}

export function RelatedTable<T extends Bound & { id: string }>(props: {
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
  /** Why a binding setup keeps stays (the tooltip of its badge). */
  keptWhy: string;
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
            cell: (row) =>
              row.kept_by_setup ? (
                <KeptBadge why={props.keptWhy} />
              ) : (
                <button type="button" onClick={() => void props.run(() => remove.action(row.id), changed)} data-testid={remove.testId}>
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
  keptWhy: string;
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
      keptWhy={props.keptWhy}
      run={props.run}
    />
  );
}
