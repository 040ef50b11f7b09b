import { describe, expect, it } from "vitest";
import { repoHref } from "../src/components/layout";
import { href, match, safeNext } from "../src/components/router";

const ORIGIN = "https://silt.example";

describe("href", () => {
  it("puts the path below /ui and drops empty query values", () => {
    expect(href("/repositories/r")).toBe("/ui/repositories/r");
    expect(href("/x", { ref: "main", path: "", after: undefined })).toBe("/ui/x?ref=main");
  });

  it("encodes query values", () => {
    expect(href("/x", { path: "a b/&c" })).toBe("/ui/x?path=a+b%2F%26c");
  });

  it("encodes the repository in repoHref", () => {
    expect(repoHref("my repo", "objects", { ref: "dev" })).toBe("/ui/repositories/my%20repo/objects?ref=dev");
  });
});

describe("match", () => {
  it("captures decoded parameters", () => {
    expect(match("/repositories/:repo/commits/:id", "/repositories/a%20b/commits/c1")).toEqual({ repo: "a b", id: "c1" });
  });

  it("ignores a trailing slash", () => {
    expect(match("/admin", "/admin/")).toEqual({});
  });

  it("refuses other literals and other segment counts", () => {
    expect(match("/repositories/:repo/tags", "/repositories/r/branches")).toBeNull();
    expect(match("/repositories/:repo", "/repositories/r/tags")).toBeNull();
  });

  it("refuses a segment that is not valid percent-encoding", () => {
    expect(match("/repositories/:repo", "/repositories/%E0%A4%A")).toBeNull();
  });
});

describe("safeNext", () => {
  it("keeps a path of this UI with its query", () => {
    expect(safeNext("/ui/repositories/r/objects?ref=main", ORIGIN)).toBe("/ui/repositories/r/objects?ref=main");
  });

  it("goes home without a next", () => {
    expect(safeNext(null, ORIGIN)).toBe("/ui/");
    expect(safeNext("", ORIGIN)).toBe("/ui/");
  });

  it("never leaves the UI or the origin", () => {
    for (const next of [
      "https://evil.example/ui/",
      "//evil.example/ui/",
      "/ui/\\evil.example",
      "/api/v1/repositories",
      "javascript:alert(1)",
      "/ui/../api/v1/auth/logout",
    ]) {
      expect(safeNext(next, ORIGIN), next).toBe("/ui/");
    }
  });
});
