// A user's credentials: list (never a secret), delete, and create - the new secret is shown
// this once, with a copy control; the API never sends it again, so a reload loses it.
import { useState } from "preact/hooks";
import { ConfirmDialog } from "../../../components/confirm_dialog";
import { ErrorNote } from "../../../components/error_page";
import { formatTime } from "../../../components/format";
import { PagedTable } from "../../../components/paged_table";
import { type Credentials, type CredentialsWithSecret, iamApi } from "./iam_api";

export function CredentialsPanel({ userId }: { userId: string }) {
  const [version, setVersion] = useState(0);
  const [created, setCreated] = useState<CredentialsWithSecret | null>(null);
  const [deleting, setDeleting] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const create = async () => {
    setBusy(true);
    setError(undefined);
    try {
      setCreated(await iamApi.createCredentials(userId));
      setVersion((n) => n + 1);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="credentials" data-testid="credentials">
      <h3>Credentials</h3>
      {created && <NewSecret credentials={created} onDismiss={() => setCreated(null)} />}
      <ErrorNote error={error} />
      <div class="actions">
        <button type="button" class="primary" disabled={busy} onClick={() => void create()} data-testid="create-credentials">
          Create access key
        </button>
      </div>
      <PagedTable<Credentials>
        testId="credentials-table"
        resetKey={`${userId}/${version}`}
        load={(after, signal) => iamApi.credentials(userId, after, signal)}
        rowKey={(c) => c.access_key_id}
        empty="No credentials."
        columns={[
          { title: "Access key ID", cell: (c) => <code data-testid="access-key-id">{c.access_key_id}</code> },
          { title: "Created", cell: (c) => formatTime(c.creation_date) },
          {
            title: "",
            cell: (c) => (
              <button type="button" class="danger" onClick={() => setDeleting(c.access_key_id)} data-testid="delete-credentials">
                Delete
              </button>
            ),
          },
        ]}
      />
      {deleting !== null && (
        <ConfirmDialog
          title={`Delete access key ${deleting}?`}
          confirmLabel="Delete access key"
          onConfirm={async () => {
            await iamApi.deleteCredentials(userId, deleting);
            if (created?.access_key_id === deleting) setCreated(null);
            setVersion((n) => n + 1);
          }}
          onClose={() => setDeleting(null)}
        >
          <p>Clients using it are refused from now on.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}

function NewSecret({ credentials, onDismiss }: { credentials: CredentialsWithSecret; onDismiss: () => void }) {
  const [copied, setCopied] = useState("");
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(credentials.secret_access_key);
      setCopied("Copied to the clipboard.");
    } catch {
      setCopied("The browser refused the clipboard: select the secret and copy it.");
    }
  };
  return (
    <div class="new-secret card" role="status" data-testid="new-secret">
      <p>
        <strong>New access key created.</strong> This is the only time its secret is shown: copy it now.
      </p>
      <label>
        Access key ID
        <input readOnly value={credentials.access_key_id} data-testid="new-access-key-id" />
      </label>
      <label>
        Secret access key
        <input readOnly value={credentials.secret_access_key} onFocus={(e) => e.currentTarget.select()} data-testid="new-secret-value" />
      </label>
      <div class="actions">
        <button type="button" onClick={() => void copy()} data-testid="copy-secret">
          Copy secret
        </button>
        <button type="button" onClick={onDismiss}>
          Done
        </button>
      </div>
      {copied && <p class="hint">{copied}</p>}
    </div>
  );
}
