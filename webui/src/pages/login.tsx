// Login with an access key and secret: the API sets the HttpOnly session cookie, so a reload
// stays signed in until it expires or the user logs out.
import { useState } from "preact/hooks";
import { ErrorNote } from "../components/error_page";
import { type CurrentUser, login } from "../session";

export function LoginPage({ onLogin }: { onLogin: (user: CurrentUser) => void }) {
  const [accessKeyId, setAccessKeyId] = useState("");
  const [secret, setSecret] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      onLogin(await login(accessKeyId.trim(), secret));
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };
  return (
    <main class="login">
      <form class="card" onSubmit={(event) => void submit(event)} data-testid="login-form">
        <h1>Silt</h1>
        <p>Sign in with an access key.</p>
        <label>
          Access key ID
          <input name="access_key_id" autoComplete="username" required value={accessKeyId} onInput={(e) => setAccessKeyId(e.currentTarget.value)} />
        </label>
        <label>
          Secret access key
          <input name="secret_access_key" type="password" autoComplete="current-password" required value={secret} onInput={(e) => setSecret(e.currentTarget.value)} />
        </label>
        <ErrorNote error={error} />
        <button type="submit" class="primary" disabled={busy}>
          Log in
        </button>
      </form>
    </main>
  );
}
