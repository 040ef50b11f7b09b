import { describe, expect, it } from "vitest";
import { ApiError } from "../src/api";
import { errorTitle } from "../src/components/error_page";
import { patternRegExp, refusalOf, repoOfPath, rulesFor } from "../src/components/refusal";
import { uploadSummary } from "../src/pages/objects_upload";

describe("refusalOf", () => {
  it("reads a hook's run id and reason from lakeFS's 412", () => {
    const error = new ApiError(412, "pre-commit hook aborted, run id 'abc123': Gate/refuse: no ticket");
    expect(refusalOf(error)).toEqual({ kind: "hook", event: "pre-commit", runId: "abc123", detail: "Gate/refuse: no ticket" });
    expect(errorTitle(error)).toBe("Refused by a pre-commit hook");
  });

  it("tells a protection rule's 403 from a policy's", () => {
    expect(refusalOf(new ApiError(403, "cannot commit to protected branch"))?.kind).toBe("protection");
    expect(refusalOf(new ApiError(403, "user u may not WriteRepo on r"))).toBeNull();
    expect(errorTitle(new ApiError(403, "cannot write to protected branch"))).toBe("Refused by branch protection");
  });

  it("names a conflict and leaves other failures alone", () => {
    expect(refusalOf(new ApiError(409, "conflict found: a.csv"))?.kind).toBe("conflict");
    expect(refusalOf(new Error("boom"))).toBeNull();
    expect(errorTitle(new ApiError(500, "boom"))).toBe("Something went wrong");
  });
});

describe("protection patterns", () => {
  it("match whole branch names as graveler does", () => {
    expect(patternRegExp("main").test("main")).toBe(true);
    expect(patternRegExp("main").test("mainline")).toBe(false);
    expect(patternRegExp("rel-*").test("rel-1")).toBe(true);
    expect(patternRegExp("rel-*").test("rel-1/x")).toBe(false);
    expect(patternRegExp("rel/**").test("rel/a/b")).toBe(true);
    expect(patternRegExp("a.b").test("axb")).toBe(false);
    expect(rulesFor([{ pattern: "ma*" }, { pattern: "dev" }], "main").map((r) => r.pattern)).toEqual(["ma*"]);
  });

  it("find the repository of a UI path", () => {
    expect(repoOfPath("/repositories/r%201/changes")).toBe("r 1");
    expect(repoOfPath("/admin")).toBe("");
  });
});

describe("uploadSummary", () => {
  it("never says the others were uploaded when none was", () => {
    expect(uploadSummary([{ state: "failed" }])).toBe("Nothing was uploaded: the file was refused.");
    expect(uploadSummary([{ state: "failed" }, { state: "failed" }])).toBe("Nothing was uploaded: all 2 files were refused.");
    expect(uploadSummary([{ state: "failed" }, { state: "done" }])).toBe("1 file failed; 1 file uploaded.");
    expect(uploadSummary([{ state: "done" }])).toBe("");
    expect(uploadSummary([{ state: "failed" }, { state: "uploading" }])).toBe("");
  });
});
