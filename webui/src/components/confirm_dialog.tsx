// A modal confirmation for destructive actions. With `typeToConfirm`, the user must type that
// text (a repository's name) before the action is enabled.
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { ErrorNote } from "./error_page";

export interface ConfirmDialogProps {
  title: string;
  children?: ComponentChildren;
  confirmLabel?: string;
  typeToConfirm?: string;
  /** Runs the action; a thrown error is shown in the dialog, which stays open. */
  onConfirm: () => Promise<void>;
  onClose: () => void;
}

export function ConfirmDialog(props: ConfirmDialogProps) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [typed, setTyped] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    dialog.current?.showModal();
  }, []);
  const ready = !busy && (props.typeToConfirm === undefined || typed === props.typeToConfirm);
  const confirm = async (event: Event) => {
    event.preventDefault();
    if (!ready) return;
    setBusy(true);
    setError(undefined);
    try {
      await props.onConfirm();
      props.onClose();
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };
  return (
    <dialog ref={dialog} class="dialog" onClose={props.onClose} data-testid="confirm-dialog">
      <form onSubmit={(event) => void confirm(event)}>
        <h3>{props.title}</h3>
        {props.children}
        {props.typeToConfirm !== undefined && (
          <label>
            Type <code>{props.typeToConfirm}</code> to confirm
            <input
              name="confirm"
              value={typed}
              autoComplete="off"
              onInput={(event) => setTyped(event.currentTarget.value)}
            />
          </label>
        )}
        <ErrorNote error={error} />
        <div class="actions">
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button type="submit" class="danger" disabled={!ready}>
            {props.confirmLabel ?? "Confirm"}
          </button>
        </div>
      </form>
    </dialog>
  );
}
