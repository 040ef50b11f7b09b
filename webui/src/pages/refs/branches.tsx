// Branches: the list with each head commit, create from any ref, delete (confirmed; not offered
// for the default branch nor for one a protection rule keeps, which say why instead).
import { useState } from "preact/hooks";
import { api, call, seg } from "../../api";
import { ErrorPage, Loading } from "../../components/error_page";
import { repoHref } from "../../components/layout";
import { PagedTable } from "../../components/paged_table";
import { protectionSettingsHref } from "../../components/protected_badge";
import { type ProtectionRule, blocksWrites, protectionRules, rulesFor } from "../../components/refusal";
import { Link } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { type NamedRef, PAGE_SIZE, refOrDefault, repoPath } from "./model";
import { CreateRefForm, DeleteRefButton, HeadCommit } from "./ref_forms";

export function BranchesPage({ repo }: { repo: string }) {
  const defaultBranch = useAsync((signal) => refOrDefault(repo, null, signal), [repo]);
  // A branch whose protection refuses deletion offers no Delete: it names the rule instead. The
  // rules cannot always be read ([]): the server still refuses what they forbid.
  const rules = useAsync((signal) => protectionRules(repo, signal).catch(() => []), [repo]).data ?? [];
  const [generation, setGeneration] = useState(0);
  if (defaultBranch.error) return <ErrorPage error={defaultBranch.error} />;
  if (!defaultBranch.data) return <Loading what="branches" />;
  const changed = () => setGeneration((n) => n + 1);
  const branches = `${repoPath(repo)}/branches`;
  return (
    <div class="refs-page" data-testid="branches-page">
      <CreateRefForm
        repo={repo}
        kind="branch"
        defaultSource={defaultBranch.data}
        create={async (name, source) => {
          // Answered as text (the new branch's commit id), not JSON.
          await call(branches, { method: "POST", json: { name, source } });
          changed();
        }}
      />
      <PagedTable<NamedRef>
        load={(after, signal) => api.page<NamedRef>(branches, {}, after, PAGE_SIZE, signal)}
        columns={[
          {
            title: "Branch",
            cell: (branch) => (
              <Link href={repoHref(repo, "objects", { ref: branch.id })}>
                <strong>{branch.id}</strong>
              </Link>
            ),
          },
          { title: "Head commit", cell: (branch) => <HeadCommit repo={repo} commitId={branch.commit_id} /> },
          {
            title: "",
            className: "row-actions",
            cell: (branch) => (
              <>
                <Link href={repoHref(repo, "commits", { ref: branch.id })}>History</Link>{" "}
                <Link href={repoHref(repo, "changes", { ref: branch.id })}>Changes</Link>{" "}
                <BranchDelete
                  repo={repo}
                  name={branch.id}
                  isDefault={branch.id === defaultBranch.data}
                  patterns={protecting(rules, branch.id)}
                  remove={() => api.del(`${branches}/${seg(branch.id)}`)}
                  onDeleted={changed}
                />
              </>
            ),
          },
        ]}
        rowKey={(branch) => branch.id}
        resetKey={String(generation)}
        empty="No branches."
        testId="branches-table"
      />
    </div>
  );
}

function protecting(rules: readonly ProtectionRule[], branch: string): string[] {
  return rulesFor(rules, branch)
    .filter(blocksWrites)
    .map((rule) => rule.pattern);
}

function BranchDelete(props: {
  repo: string;
  name: string;
  isDefault: boolean;
  patterns: string[];
  remove: () => Promise<void>;
  onDeleted: () => void;
}) {
  if (props.isDefault) {
    // The API refuses to delete a repository's default branch (400): no Delete to be refused.
    return (
      <span class="read-only-badge" data-testid="default-branch" title="The repository's default branch: it cannot be deleted">
        default branch
      </span>
    );
  }
  if (props.patterns.length === 0) {
    return <DeleteRefButton kind="branch" name={props.name} remove={props.remove} onDeleted={props.onDeleted} />;
  }
  const rules = props.patterns.join(", ");
  return (
    <Link
      href={protectionSettingsHref(props.repo)}
      class="read-only-badge protected-badge"
      data-testid="branch-protected"
      title={`Protected by the rule${props.patterns.length > 1 ? "s" : ""} ${rules}: the branch cannot be deleted while the rule stands`}
    >
      protected ({rules})
    </Link>
  );
}
