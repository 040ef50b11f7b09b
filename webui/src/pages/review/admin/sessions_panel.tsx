// A user's web sessions: an administrator ends all of them at once ("sign out everywhere" for
// someone else: a lost laptop, a departure). Their access keys keep working.
import { useState } from "preact/hooks";
import { ConfirmDialog } from "../../../components/confirm_dialog";
import { iamApi } from "./iam_api";

export function SessionsPanel({ userId }: { userId: string }) {
  const [asking, setAsking] = useState(false);
  const [done, setDone] = useState(false);
  return (
    <section class="sessions-panel" data-testid="sessions-panel">
      <h3>Web sessions</h3>
      <p class="hint">Signs {userId} out of the web UI in every browser. Access keys are not affected.</p>
      <button type="button" class="danger" onClick={() => setAsking(true)} data-testid="revoke-sessions">
        Sign out everywhere
      </button>
      {done && (
        <p class="hint" role="status" data-testid="sessions-revoked">
          Every web session of {userId} has ended.
        </p>
      )}
      {asking && (
        <ConfirmDialog
          title={`Sign ${userId} out everywhere?`}
          confirmLabel="Sign out everywhere"
          onConfirm={async () => {
            await iamApi.revokeSessions(userId);
            setDone(true);
          }}
          onClose={() => setAsking(false)}
        >
          <p>Every browser signed in as {userId} goes back to the sign-in page on its next request.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}
