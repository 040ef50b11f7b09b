import { describe, expect, it } from "vitest";
import { objectDiffHref } from "../src/pages/diff/diff_links";
import { rowMatch } from "../src/pages/diff/object_diff";
import type { ObjectStats } from "../src/pages/objects";
import { removedEntries } from "../src/pages/objects_changes";
import { readmeOf } from "../src/pages/objects_readme";

const object = (path: string): ObjectStats => ({ path, path_type: "object" });
const folder = (path: string): ObjectStats => ({ path, path_type: "common_prefix" });

describe("readmeOf", () => {
  it("finds the directory's own README, README.md first", () => {
    const entries = [object("d/readme.markdown"), object("d/README.md"), object("d/a.csv")];
    expect(readmeOf(entries, "d/")?.path).toBe("d/README.md");
    expect(readmeOf([object("d/readme.md")], "d/")?.path).toBe("d/readme.md");
  });

  it("ignores folders and other names", () => {
    expect(readmeOf([folder("README.md/"), object("README.txt"), object("NOT-README.md")], "")).toBeUndefined();
  });
});

describe("removedEntries", () => {
  it("lists the removed objects the listing no longer has, in order", () => {
    const changes = new Map([
      ["d/z.csv", "removed"],
      ["d/a.csv", "removed"],
      ["d/b.csv", "added"],
      ["d/kept.csv", "removed"],
    ] as const);
    expect(removedEntries(new Map(changes), [object("d/b.csv"), object("d/kept.csv")])).toEqual(["d/a.csv", "d/z.csv"]);
  });
});

describe("row matching in the URL", () => {
  it("keeps content and position and defaults anything else to auto", () => {
    expect(rowMatch("content")).toBe("content");
    expect(rowMatch("position")).toBe("position");
    expect(rowMatch(null)).toBe("auto");
    expect(rowMatch("bogus")).toBe("auto");
  });

  it("writes a non-default matching into the diff's URL", () => {
    expect(objectDiffHref("r", "a", "b", "p", "two_dot", undefined, "position")).toBe("/ui/repositories/r/diff?left=a&right=b&path=p&match=position");
    expect(objectDiffHref("r", "a", "b", "p", "two_dot", undefined, "auto")).toBe("/ui/repositories/r/diff?left=a&right=b&path=p");
  });
});

describe("removedEntries on a page with more after it", () => {
  it("keeps the removed objects up to the page's last entry", () => {
    const changes = new Map([
      ["d/a.csv", "removed"],
      ["d/z.csv", "removed"],
    ] as const);
    expect(removedEntries(new Map(changes), [object("d/m.csv")], true)).toEqual(["d/a.csv"]);
  });
});
