import { describe, expect, it } from "vitest";
import { ApiError, apiErrorOf } from "../src/api";
import { errorTitle } from "../src/components/error_page";
import { patternMatches, refusalOf, repoOfPath, rulesFor } from "../src/components/refusal";
import { uploadSummary } from "../src/pages/objects_upload";

describe("refusalOf", () => {
  it("reads a hook's run id and reason from lakeFS's 412", () => {
    const error = new ApiError(412, "pre-commit hook aborted, run id 'abc123': Gate/refuse: no ticket");
    expect(refusalOf(error)).toEqual({ kind: "hook", event: "pre-commit", runId: "abc123", detail: "Gate/refuse: no ticket" });
    expect(errorTitle(error)).toBe("Refused by a pre-commit hook");
  });

  it("tells a protection rule's 403 from a policy's by the error's typed field, not its text", () => {
    const refused = apiErrorOf(
      403,
      "Forbidden",
      JSON.stringify({ message: "cannot commit to protected branch", branch_protection: { branch: "main", rules: ["ma*"] } }),
    );
    expect(refusalOf(refused)).toEqual({ kind: "protection", message: "cannot commit to protected branch", branch: "main", rules: ["ma*"] });
    expect(errorTitle(refused)).toBe("Refused by branch protection");
    // The same words without the field are a policy's refusal (or a proxy's): not named a rule's.
    expect(refusalOf(apiErrorOf(403, "Forbidden", JSON.stringify({ message: "cannot write to protected branch" })))).toBeNull();
    expect(refusalOf(new ApiError(403, "user u may not WriteRepo on r"))).toBeNull();
    // A body that is not lakeFS's JSON keeps the status line.
    const proxied = apiErrorOf(403, "Forbidden", "<html>denied</html>");
    expect([proxied.message, proxied.protection]).toEqual(["403 Forbidden", null]);
  });

  it("names a conflict and leaves other failures alone", () => {
    expect(refusalOf(new ApiError(409, "conflict found: a.csv"))?.kind).toBe("conflict");
    expect(refusalOf(new Error("boom"))).toBeNull();
    expect(errorTitle(new ApiError(500, "boom"))).toBe("Something went wrong");
  });
});

describe("protection patterns", () => {
  it("match whole branch names as graveler does", () => {
    expect(patternMatches("main", "main")).toBe(true);
    expect(patternMatches("main", "mainline")).toBe(false);
    expect(patternMatches("rel-*", "rel-1")).toBe(true);
    expect(patternMatches("rel-*", "rel-1/x")).toBe(false);
    expect(patternMatches("rel/**", "rel/a/b")).toBe(true);
    expect(patternMatches("a.b", "axb")).toBe(false);
    expect(patternMatches("*", "")).toBe(true);
    expect(patternMatches("**", "a/b")).toBe(true);
    // `**/` at a segment's start: any whole segments, also none.
    expect(patternMatches("**/rel", "rel")).toBe(true);
    expect(patternMatches("**/rel", "team/a/rel")).toBe(true);
    expect(patternMatches("**/rel", "teamrel")).toBe(false);
    expect(patternMatches("team/**/rel", "team/rel")).toBe(true);
    expect(patternMatches("team/**/rel", "team/x/y/rel")).toBe(true);
    expect(patternMatches("team/**/rel", "team/xrel")).toBe(false);
    expect(patternMatches("a**b", "a/x/b")).toBe(true);
    expect(patternMatches("a*b", "a/b")).toBe(false);
    expect(rulesFor([{ pattern: "ma*" }, { pattern: "dev" }], "main").map((r) => r.pattern)).toEqual(["ma*"]);
  });

  it("agree with graveler's RE2 reading on short patterns and names", () => {
    // graveler's glob as a regular expression (engine/core/committed/globs.py), safe on inputs this short.
    const reading = (pattern: string): RegExp => {
      let source = "";
      for (let i = 0; i < pattern.length; ) {
        if (pattern.startsWith("**", i)) {
          const segments = (i === 0 || pattern[i - 1] === "/") && pattern[i + 2] === "/";
          source += segments ? "(?:.*/)?" : ".*";
          i += segments ? 3 : 2;
        } else {
          source += pattern[i] === "*" ? "[^/]*" : pattern[i];
          i += 1;
        }
      }
      return new RegExp(`^${source}$`, "s");
    };
    let seed = 7;
    const pick = (alphabet: string, most: number): string => {
      let text = "";
      seed = (seed * 1103515245 + 12345) % 2147483648;
      for (let n = seed % (most + 1); n > 0; n--) {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        text += alphabet[seed % alphabet.length];
      }
      return text;
    };
    for (let round = 0; round < 3000; round++) {
      const pattern = pick("ab/**", 7);
      const name = pick("ab/", 8);
      expect([pattern, name, patternMatches(pattern, name)]).toEqual([pattern, name, reading(pattern).test(name)]);
    }
  });

  it("match in time linear in the name, whatever the pattern", () => {
    // A backtracking RegExp of this one takes about 6 s over 60 characters (and grows exponentially).
    let started = performance.now();
    expect(patternMatches("*a".repeat(6) + "*b", "a".repeat(60))).toBe(false);
    expect(performance.now() - started).toBeLessThan(500);
    const hostile = "*a".repeat(16) + "*b";
    started = performance.now();
    expect(patternMatches(hostile, "a".repeat(256))).toBe(false);
    expect(patternMatches(hostile, "a".repeat(255) + "b")).toBe(true);
    expect(rulesFor([{ pattern: hostile }], "a".repeat(200))).toEqual([]);
    expect(performance.now() - started).toBeLessThan(500);
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
