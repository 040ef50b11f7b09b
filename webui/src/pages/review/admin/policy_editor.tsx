// A policy as JSON in a text area: checked as one types (policy_schema.ts: lakeFS's shape and
// the API's bounds), saved only when that finds nothing; what the API then refuses (an unknown
// action, a right the editor does not hold) is shown in its own words beside the form.
import { useState } from "preact/hooks";
import { ErrorNote } from "../../../components/error_page";
import type { Policy, Statement } from "./iam_api";
import { checkPolicyDocument } from "./policy_schema";

// A document larger than the API accepts is refused there; this keeps the editor honest early.
const MAX_DOCUMENT_CHARS = 64 * 1024;
const MAX_ID = 128;

export function PolicyEditor(props: {
  /** "create": the id is typed here; "edit": the policy's own, fixed. */
  mode: "create" | "edit";
  initialId: string;
  statements: Statement[];
  note?: preact.ComponentChildren;
  save: (policy: Policy) => Promise<void>;
  onCancel?: () => void;
}) {
  const [id, setId] = useState(props.initialId);
  const [text, setText] = useState(JSON.stringify({ statement: props.statements }, null, 2));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const checked = checkPolicyDocument(text);
  const submit = async (event: Event) => {
    event.preventDefault();
    if (!checked.ok) return;
    setBusy(true);
    setError(undefined);
    try {
      await props.save({ id: id.trim(), statement: checked.statements });
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };
  const verb = props.mode === "create" ? "Create policy" : "Save policy";
  return (
    <form class="card policy-editor" onSubmit={(event) => void submit(event)} data-testid="policy-editor">
      <h2>{props.mode === "create" ? "New policy" : `Edit policy ${props.initialId}`}</h2>
      {props.note}
      {props.mode === "create" && (
        <label>
          Policy ID
          <input name="policy_id" required autoComplete="off" maxLength={MAX_ID} value={id} onInput={(e) => setId(e.currentTarget.value)} />
        </label>
      )}
      <label>
        Document (JSON: statements of effect, action list and resource)
        <textarea
          name="document"
          class="code"
          rows={16}
          spellcheck={false}
          maxLength={MAX_DOCUMENT_CHARS}
          aria-invalid={!checked.ok}
          aria-describedby="policy-problems"
          value={text}
          onInput={(e) => setText(e.currentTarget.value)}
        />
      </label>
      <div id="policy-problems" aria-live="polite">
        {!checked.ok && (
          <ul class="policy-problems" data-testid="policy-problems">
            {checked.problems.map((problem) => (
              <li key={problem}>{problem}</li>
            ))}
          </ul>
        )}
      </div>
      <ErrorNote error={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy || !checked.ok} data-testid="save-policy">
          {verb}
        </button>
        {props.onCancel && (
          <button type="button" onClick={props.onCancel} data-testid="cancel-edit">
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}
