// What a pull request changes, as a tree of folders with counts and sizes per change type (the
// diff summary endpoint, a folder's children loaded when it is opened): a pull request touching
// 100,000 paths opens as fast as one touching ten, and each changed object links to its diff.
import { seg } from "../../api";
import { DiffTree } from "../refs/diff_tree";
import { type PullRequest, pullDiffRange } from "./pulls_api";

export function PullDiff({ repo, pull }: { repo: string; pull: PullRequest }) {
  const { left, right, type } = pullDiffRange(pull);
  return (
    <DiffTree
      path={`/repositories/${seg(repo)}/refs/${seg(left)}/diff/${seg(right)}/summary`}
      query={{ type }}
      repo={repo}
      diffRefs={type === "three_dot" ? { left, right, type } : { left, right }}
      resetKey={`${repo}/${pull.id}/${pull.status}/${pull.merged_commit_id ?? ""}`}
      empty="No changes between the branches."
      testId="pull-diff"
    />
  );
}
