// Policies: list, view as JSON, create, edit in place, copy, delete (the editor is
// policy_editor.tsx). Silt's own policies (the API marks them `system`: setup writes them again
// at every start) are badged in the list and can be neither edited nor deleted (auth refuses
// both, 409): the page offers a copy to restrict instead.
import { useState } from "preact/hooks";
import { ConfirmDialog } from "../../../components/confirm_dialog";
import { ErrorNote, ErrorPage, Loading } from "../../../components/error_page";
import { formatTime } from "../../../components/format";
import { PagedTable } from "../../../components/paged_table";
import { href, Link, navigate } from "../../../components/router";
import { useAsync } from "../../../components/use_async";
import { AdminFrame, adminHref } from "./admin_frame";
import { iamApi, type Policy, type Statement } from "./iam_api";
import { SystemBadge } from "./principal_list";
import { PolicyEditor } from "./policy_editor";

const EXAMPLE: Statement[] = [{ effect: "allow", action: ["ReadRepo"], resource: "*" }];

export function newPolicyHref(from?: string): string {
  return href("/admin/new-policy", { from });
}

export function PoliciesPage() {
  const [version, setVersion] = useState(0);
  return (
    <AdminFrame section="policies" probe={(signal) => iamApi.policies("", signal)} probeKey="policies">
      <header class="page-header">
        <h2>Policies</h2>
        <Link class="button primary" href={newPolicyHref()} data-testid="new-policy">
          New policy
        </Link>
      </header>
      <PagedTable<Policy>
        testId="policies-table"
        resetKey={String(version)}
        load={(after, signal) => iamApi.policies(after, signal)}
        rowKey={(p) => p.id}
        empty="No policies."
        columns={[
          {
            title: "Policy",
            cell: (p) => (
              <>
                <Link href={adminHref("policies", p.id)}>{p.id}</Link>
                {p.system && <SystemBadge kind="policy" />}
              </>
            ),
          },
          { title: "Statements", className: "number", cell: (p) => String(p.statement.length) },
          { title: "Created", cell: (p) => formatTime(p.creation_date) },
        ]}
      />
      <button type="button" class="link" onClick={() => setVersion((n) => n + 1)}>
        Refresh
      </button>
    </AdminFrame>
  );
}

export function PolicyPage({ policyId }: { policyId: string }) {
  const [version, setVersion] = useState(0);
  const policy = useAsync((signal) => iamApi.getPolicy(policyId, signal), [policyId, version]);
  const [deleting, setDeleting] = useState(false);
  const [editing, setEditing] = useState(false);
  const siltOwn = policy.data?.system === true;
  return (
    <AdminFrame section="policies" probe={(signal) => iamApi.getPolicy(policyId, signal)} probeKey={policyId}>
      <div class="policy-page" data-testid="policy-page">
        <header class="page-header">
          <h2>
            Policy <span data-testid="policy-id">{policyId}</span>
          </h2>
          {policy.data && !siltOwn && (
            <button
              type="button"
              onClick={() => setEditing(true)}
              disabled={editing || !policy.data}
              data-testid="edit-policy"
            >
              Edit
            </button>
          )}
          <Link class="button" href={newPolicyHref(policyId)} data-testid="edit-as-new">
            Copy as a new policy
          </Link>
          {policy.data && !siltOwn && (
            <button type="button" class="danger" onClick={() => setDeleting(true)} data-testid="delete-policy">
              Delete
            </button>
          )}
        </header>
        {siltOwn && (
          <p class="hint" data-testid="silt-policy-note">
            This is one of Silt&apos;s own policies: Silt writes it again at every start, so it can be neither edited nor
            deleted. To
            restrict what it allows, create a new policy (e.g. copy this one), attach it instead of this one, or attach
            a policy with Deny statements next to it.
          </p>
        )}
        <ErrorNote error={policy.error} />
        {editing && policy.data ? (
          <PolicyEditor
            mode="edit"
            initialId={policyId}
            statements={policy.data.statement}
            note={<p class="hint">Every user and group it is attached to gets the new statements at once.</p>}
            save={async (changed) => {
              await iamApi.updatePolicy(changed);
              setEditing(false);
              setVersion((n) => n + 1);
            }}
            onCancel={() => setEditing(false)}
          />
        ) : (
          policy.data && (
            <pre class="json" data-testid="policy-json">
              {JSON.stringify({ statement: policy.data.statement }, null, 2)}
            </pre>
          )
        )}
        {deleting && (
          <ConfirmDialog
            title={`Delete policy ${policyId}?`}
            confirmLabel="Delete policy"
            onConfirm={async () => {
              await iamApi.deletePolicy(policyId);
              navigate(adminHref("policies"));
            }}
            onClose={() => setDeleting(false)}
          >
            <p>Users and groups it is attached to lose what it allows.</p>
          </ConfirmDialog>
        )}
      </div>
    </AdminFrame>
  );
}

export function NewPolicyPage({ from }: { from: string }) {
  const source = useAsync(async (signal) => (from ? (await iamApi.getPolicy(from, signal)).statement : EXAMPLE), [from]);
  if (source.error) return <ErrorPage error={source.error} />;
  if (!source.data) return <Loading what="policy" />;
  return (
    <AdminFrame section="policies" probe={(signal) => iamApi.policies("", signal)} probeKey="new-policy">
      <PolicyEditor
        mode="create"
        initialId={from ? `${from}-copy` : ""}
        statements={source.data}
        note={
          from && (
            <p class="hint">
              A copy of <code>{from}</code>, stored as a policy of its own.
            </p>
          )
        }
        save={async (policy) => {
          const created = await iamApi.createPolicy(policy);
          navigate(adminHref("policies", created.id));
        }}
      />
    </AdminFrame>
  );
}
