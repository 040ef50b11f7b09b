import { describe, expect, it } from "vitest";
import { ApiError } from "../src/api";
import { urisOf } from "../src/components/copy_uri";
import { refusalOf } from "../src/pages/refs/commit_actions";

describe("copy URIs", () => {
  it("names a path for lakeFS, S3 clients and the gateway's HTTP URL", () => {
    const uris = urisOf("repo", "main", "dir/a b#.csv", "http://127.0.0.1:8000");
    expect(uris.lakefs).toBe("lakefs://repo/main/dir/a b#.csv");
    expect(uris.s3).toBe("s3://repo/main/dir/a b#.csv");
    expect(uris.http).toBe("http://127.0.0.1:8000/repo/main/dir/a%20b%23.csv");
  });
});

describe("revert and cherry-pick refusals", () => {
  it("says what a status means", () => {
    expect(refusalOf("revert", "main", new ApiError(409, "conflict found")).message).toContain("conflicts with changes on main");
    expect(refusalOf("cherry-pick", "prod", new ApiError(403, "user u may not WriteRepo on r")).message).toContain(
      "refused on prod",
    );
    expect(refusalOf("revert", "main", new ApiError(412, "pre-commit hook refused")).message).toBe(
      "A hook refused the revert: pre-commit hook refused",
    );
    // A refusal the dialog names and links to (the rule, the hook's run) stays the API's own.
    const protectedBranch = new ApiError(403, "cannot write to protected branch", { branch: "prod", rules: ["pr*"] });
    expect(refusalOf("cherry-pick", "prod", protectedBranch)).toBe(protectedBranch);
    const hook = new ApiError(412, "pre-commit hook aborted, run id 'r1': no ticket");
    expect(refusalOf("revert", "main", hook)).toBe(hook);
    expect(refusalOf("revert", "main", new Error("offline")).message).toBe("offline");
  });
});
