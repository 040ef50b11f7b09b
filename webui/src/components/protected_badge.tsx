// A protected branch, marked before anyone tries to write to it: which rule keeps writes off it,
// what it refuses here, and a link to the repository's protection settings where the rule is.
import { Link, href } from "./router";

/** The settings page's branch protection section. */
export function protectionSettingsHref(repo: string): string {
  return href(`/repositories/${encodeURIComponent(repo)}/settings`) + "#branch-protection";
}

export function ProtectedBadge(props: { repo: string; branch: string; patterns: string[]; refuses: string; testId?: string }) {
  const rules = `rule${props.patterns.length > 1 ? "s" : ""}`;
  return (
    <span
      class="read-only-badge protected-badge"
      data-testid={props.testId ?? "branch-protected"}
      title={`Branch protection (the ${rules} ${props.patterns.join(", ")}) refuses ${props.refuses} on ${props.branch}: change it through a merge or a pull request`}
    >
      {props.branch} is protected by the {rules}{" "}
      {props.patterns.map((pattern, i) => (
        <span key={pattern}>
          {i > 0 && ", "}
          <code data-testid="protected-rule">{pattern}</code>
        </span>
      ))}
      : no {props.refuses} here, changes come through a merge or a pull request.{" "}
      <Link href={protectionSettingsHref(props.repo)} data-testid="protection-settings">
        Protection settings
      </Link>
    </span>
  );
}
