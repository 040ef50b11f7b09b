import { describe, expect, it } from "vitest";
import { crumbs, objectsHref, parentOf } from "../src/pages/objects_paths";
import { cellText, previewKind } from "../src/pages/objects_preview";

describe("parentOf", () => {
  it("gives the directory holding an object or a directory", () => {
    expect(parentOf("a/b/c.csv")).toBe("a/b/");
    expect(parentOf("a/b/")).toBe("a/");
    expect(parentOf("top.txt")).toBe("");
    expect(parentOf("a/")).toBe("");
  });
});

describe("crumbs", () => {
  it("links every directory and shows the object last, unlinked", () => {
    expect(crumbs("a/b/c.csv")).toEqual([
      { name: "a", prefix: "a/", link: true },
      { name: "b", prefix: "a/b/", link: true },
      { name: "c.csv", prefix: "a/b/c.csv/", link: false },
    ]);
  });

  it("links the last crumb of a directory", () => {
    expect(crumbs("a/b/").map((crumb) => crumb.link)).toEqual([true, true]);
    expect(crumbs("")).toEqual([]);
  });
});

describe("objectsHref", () => {
  it("leaves out the root path and the first page", () => {
    expect(objectsHref("r", "main", "", undefined, 1)).toBe("/ui/repositories/r/objects?ref=main");
  });

  it("carries the cursor and the page number past the first", () => {
    expect(objectsHref("r", "main", "a/", "a/x", 2)).toBe("/ui/repositories/r/objects?ref=main&path=a%2F&after=a%2Fx&page=2");
  });
});

describe("previewKind", () => {
  it("knows the kind by extension, any case", () => {
    expect(previewKind("d/t.PARQUET", "")).toBe("parquet");
    expect(previewKind("t.tsv", "application/octet-stream")).toBe("csv");
    expect(previewKind("p.JPG", "")).toBe("image");
    expect(previewKind("notes.md", "")).toBe("text");
  });

  it("knows the kind by content type, parameters ignored", () => {
    expect(previewKind("blob", "text/csv; charset=utf-8")).toBe("csv");
    expect(previewKind("blob", "application/vnd.api+json")).toBe("text");
    expect(previewKind("blob", "image/png")).toBe("image");
  });

  it("has no preview for unknown binary data or a dot in a directory name", () => {
    expect(previewKind("data.bin", "application/octet-stream")).toBe("none");
    expect(previewKind("v1.csv/blob", "")).toBe("none");
  });
});

describe("cellText", () => {
  it("shows nulls, scalars and nested values", () => {
    expect(cellText(null)).toBe("null");
    expect(cellText(undefined)).toBe("null");
    expect(cellText("x")).toBe("x");
    expect(cellText(1.5)).toBe("1.5");
    expect(cellText(false)).toBe("false");
    expect(cellText({ a: [1, 2] })).toBe('{"a":[1,2]}');
  });
});
