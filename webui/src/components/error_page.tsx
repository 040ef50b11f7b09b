// What a page shows when a call fails: the API's own message, never a stack trace; a 403 is
// a clear "not allowed"; a refusal whose cause the UI can name (a hook, a protection rule, a
// conflict: refusal.ts) says so and links to it.
import { ApiError, messageOf } from "../api";
import { type Refusal, refusalOf, protectionRules, repoOfPath, rulesFor } from "./refusal";
import { Link, currentLocation, href } from "./router";
import { useAsync } from "./use_async";

export function errorTitle(error: unknown): string {
  const refusal = refusalOf(error);
  if (refusal?.kind === "hook") return `Refused by a ${refusal.event} hook`;
  if (refusal?.kind === "protection") return "Refused by branch protection";
  if (refusal?.kind === "conflict") return "Conflict";
  if (error instanceof ApiError) {
    if (error.status === 400) return "Not accepted";
    if (error.status === 403) return "Not allowed";
    if (error.status === 404) return "Not found";
    if (error.status === 401) return "Signed out";
    if (error.status === 409) return "Conflict";
    if (error.status === 412) return "Precondition failed";
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

/** An error next to the control that caused it (a form, a dialog); a protection refusal names
 * the branch and the rules that matched it, as the API's answer does. */
export function ErrorNote({ error, repo }: { error: unknown; repo?: string }) {
  if (!error) return null;
  const refusal = refusalOf(error);
  const repository = repo ?? repoOfPath(currentLocation().path);
  if (refusal && refusal.kind !== "conflict" && repository) {
    return <RefusalNote error={error} refusal={refusal} repo={repository} />;
  }
  return (
    <p class="error-note" role="alert" data-testid="error-note">
      <strong>{errorTitle(error)}:</strong> {messageOf(error)}
    </p>
  );
}

function RefusalNote(props: { error: unknown; refusal: Exclude<Refusal, { kind: "conflict" }>; repo: string }) {
  const { refusal, repo } = props;
  if (refusal.kind === "hook") {
    return (
      <div class="error-note refusal" role="alert" data-testid="error-note" data-refusal="hook">
        <strong>{errorTitle(props.error)}:</strong> {refusal.detail || messageOf(props.error)}{" "}
        <Link href={href(`/repositories/${encodeURIComponent(repo)}/actions/${encodeURIComponent(refusal.runId)}`)} data-testid="refusal-run">
          See action run {refusal.runId}
        </Link>
      </div>
    );
  }
  return <ProtectionNote error={props.error} refusal={refusal} repo={repo} />;
}

function ProtectionNote(props: { error: unknown; refusal: Extract<Refusal, { kind: "protection" }>; repo: string }) {
  const { repo, refusal } = props;
  const branch = refusal.branch;
  // The API names the rules that matched; an answer without them (a rule of a pull request's
  // merge from an older server) is matched here against the rules, which readers may read.
  const named = refusal.rules.length > 0;
  const rules = useAsync(
    (signal) => (branch && !named ? protectionRules(repo, signal).catch(() => []) : Promise.resolve([])),
    [repo, branch, named],
  );
  const matching = named ? refusal.rules : branch && rules.data ? rulesFor(rules.data, branch).map((rule) => rule.pattern) : [];
  return (
    <div class="error-note refusal" role="alert" data-testid="error-note" data-refusal="protection">
      <strong>{errorTitle(props.error)}:</strong> {refusal.message}
      {matching.length > 0 && (
        <>
          {" "}
          ({branch} matches the rule{matching.length > 1 ? "s" : ""}{" "}
          {matching.map((pattern, i) => (
            <span key={pattern}>
              {i > 0 && ", "}
              <code data-testid="refusal-rule">{pattern}</code>
            </span>
          ))}
          ).
        </>
      )}{" "}
      <Link href={href(`/repositories/${encodeURIComponent(repo)}/settings`) + "#branch-protection"} data-testid="refusal-settings">
        Branch protection settings
      </Link>
    </div>
  );
}

export function Loading({ what }: { what?: string }) {
  return <p class="loading">Loading{what ? ` ${what}` : ""}…</p>;
}
