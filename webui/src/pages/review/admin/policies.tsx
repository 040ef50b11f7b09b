// Policies: list, view as JSON, create, delete. A stored policy cannot be changed in place (the
// API has no update: attachments are checked against a policy's content, so it stays fixed);
// "edit" starts a new policy from a copy of its statements, to attach in its place.
import { useState } from "preact/hooks";
import { ConfirmDialog } from "../../../components/confirm_dialog";
import { ErrorNote, ErrorPage, Loading } from "../../../components/error_page";
import { formatTime } from "../../../components/format";
import { PagedTable } from "../../../components/paged_table";
import { href, Link, navigate } from "../../../components/router";
import { useAsync } from "../../../components/use_async";
import { AdminFrame, adminHref } from "./admin_frame";
import { iamApi, type Policy, type Statement } from "./iam_api";

// A document larger than the API accepts is refused there; this keeps the editor honest early.
const MAX_DOCUMENT_CHARS = 64 * 1024;

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
          { title: "Policy", cell: (p) => <Link href={adminHref("policies", p.id)}>{p.id}</Link> },
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
  const policy = useAsync((signal) => iamApi.getPolicy(policyId, signal), [policyId]);
  const [deleting, setDeleting] = useState(false);
  return (
    <AdminFrame section="policies" probe={(signal) => iamApi.getPolicy(policyId, signal)} probeKey={policyId}>
      <div class="policy-page" data-testid="policy-page">
        <header class="page-header">
          <h2>
            Policy <span data-testid="policy-id">{policyId}</span>
          </h2>
          <Link class="button" href={newPolicyHref(policyId)} data-testid="edit-as-new">
            Edit as a new policy
          </Link>
          <button type="button" class="danger" onClick={() => setDeleting(true)} data-testid="delete-policy">
            Delete
          </button>
        </header>
        <ErrorNote error={policy.error} />
        {policy.data && (
          <pre class="json" data-testid="policy-json">
            {JSON.stringify({ statement: policy.data.statement }, null, 2)}
          </pre>
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
      <PolicyEditor initialId={from ? `${from}-v2` : ""} statements={source.data} basedOn={from} />
    </AdminFrame>
  );
}

function PolicyEditor({ initialId, statements, basedOn }: { initialId: string; statements: Statement[]; basedOn: string }) {
  const [id, setId] = useState(initialId);
  const [text, setText] = useState(JSON.stringify({ statement: statements }, null, 2));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    let document: { statement?: unknown };
    try {
      document = JSON.parse(text) as { statement?: unknown };
    } catch (failure) {
      setError(new Error(`the policy is not valid JSON: ${failure instanceof Error ? failure.message : String(failure)}`));
      return;
    }
    if (!document || !Array.isArray(document.statement)) {
      setError(new Error('the policy must be a JSON object with a "statement" array'));
      return;
    }
    setBusy(true);
    try {
      const created = await iamApi.createPolicy({ id: id.trim(), statement: document.statement as Statement[] });
      navigate(adminHref("policies", created.id));
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };
  return (
    <form class="card policy-editor" onSubmit={(event) => void submit(event)} data-testid="policy-editor">
      <h2>New policy</h2>
      {basedOn && (
        <p class="hint">
          A copy of <code>{basedOn}</code>. Policies cannot change once stored: create this one, attach it where{" "}
          <code>{basedOn}</code> is attached, then detach or delete the old one.
        </p>
      )}
      <label>
        Policy ID
        <input name="policy_id" required autoComplete="off" value={id} onInput={(e) => setId(e.currentTarget.value)} />
      </label>
      <label>
        Document (JSON: statements of effect, action list and resource)
        <textarea
          name="document"
          class="code"
          rows={16}
          spellcheck={false}
          maxLength={MAX_DOCUMENT_CHARS}
          value={text}
          onInput={(e) => setText(e.currentTarget.value)}
        />
      </label>
      <ErrorNote error={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy} data-testid="create-policy">
          Create policy
        </button>
      </div>
    </form>
  );
}
