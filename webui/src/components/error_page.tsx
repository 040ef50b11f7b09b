// What a page shows when a call fails: the API's own message, never a stack trace; a 403 is
// a clear "not allowed".
import { ApiError, messageOf } from "../api";

export function errorTitle(error: unknown): string {
  if (error instanceof ApiError) {
    if (error.status === 400) return "Not accepted";
    if (error.status === 403) return "Not allowed";
    if (error.status === 404) return "Not found";
    if (error.status === 401) return "Signed out";
    if (error.status === 0) return "Server unreachable";
  }
  return "Something went wrong";
}

/** A whole-page error. */
export function ErrorPage({ error }: { error: unknown }) {
  return (
    <section class="error-page" role="alert" data-testid="error-page">
      <h2>{errorTitle(error)}</h2>
      <p class="error-message">{messageOf(error)}</p>
    </section>
  );
}

/** An error next to the control that caused it (a form, a dialog). */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error-note" role="alert" data-testid="error-note">
      <strong>{errorTitle(error)}:</strong> {messageOf(error)}
    </p>
  );
}

export function Loading({ what }: { what?: string }) {
  return <p class="loading">Loading{what ? ` ${what}` : ""}…</p>;
}
