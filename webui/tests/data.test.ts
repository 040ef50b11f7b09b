import MarkdownIt from "markdown-it";
import type { VNode } from "preact";
import { describe, expect, it } from "vitest";
import { diffRefsOf, isComment, languageOf, objectDiffHref } from "../src/pages/diff/diff_links";
import { isSafeLink, renderTokens, resolveLink } from "../src/pages/markdown";
import { nextOffset } from "../src/pages/query/query_page";

describe("diffRefsOf", () => {
  it("reads the refs of a two-ref diff list, encoded names decoded", () => {
    expect(diffRefsOf("/repositories/r/refs/main/diff/feature%2Fx")).toEqual({ left: "main", right: "feature/x", type: "three_dot" });
    expect(diffRefsOf("/repositories/r/refs/a/diff/b", "two_dot")).toEqual({ left: "a", right: "b", type: "two_dot" });
  });

  it("compares a branch's last commit with its staged changes", () => {
    expect(diffRefsOf("/repositories/r/branches/dev/diff")).toEqual({ left: "dev@", right: "dev", type: "two_dot" });
  });

  it("knows no other list", () => {
    expect(diffRefsOf("/repositories/r/pulls/1")).toBeNull();
  });

  it("links the diff page with every part encoded", () => {
    expect(objectDiffHref("r", "a", "b@", "d/x y.csv")).toBe("/ui/repositories/r/diff?left=a&right=b%40&path=d%2Fx+y.csv");
    expect(objectDiffHref("r", "a", "b", "p", "three_dot", "id")).toBe("/ui/repositories/r/diff?left=a&right=b&path=p&type=three_dot&key=id");
  });
});

describe("languageOf", () => {
  it("classes a path by its extension", () => {
    expect(languageOf("src/app.PY")).toBe("python");
    expect(languageOf("q.sql")).toBe("sql");
    expect(languageOf("dir.d/README")).toBe("plain");
    expect(isComment("python", "   # why")).toBe(true);
    expect(isComment("sql", "SELECT 1 -- no")).toBe(false);
  });
});

describe("markdown", () => {
  const parser = new MarkdownIt({ html: false });
  parser.validateLink = isSafeLink;

  it("allows http(s), mailto and relative links only", () => {
    expect(isSafeLink("https://example.com/a")).toBe(true);
    expect(isSafeLink("mailto:a@b.c")).toBe(true);
    expect(isSafeLink("docs/x.md#part")).toBe(true);
    expect(isSafeLink("javascript:alert(1)")).toBe(false);
    expect(isSafeLink("JaVaScRiPt:alert(1)")).toBe(false);
    expect(isSafeLink("java\tscript:alert(1)")).toBe(false);
    expect(isSafeLink("data:text/html,<b>x</b>")).toBe(false);
  });

  it("renders elements of a fixed set, raw HTML as text", () => {
    const nodes = renderTokens(parser.parse("# Title\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1)) [y](https://e.com)", {})) as VNode[];
    expect(nodes.map((node) => node.type)).toEqual(["h1", "p", "p"]);
    expect(nodes[1].props.children).toEqual("<script>alert(1)</script>");
    const links = (nodes[2].props.children as (VNode | string)[]).filter((child) => typeof child !== "string") as VNode<{ href?: string }>[];
    expect(links.map((link) => link.props.href)).toEqual(["https://e.com"]);
  });
});

describe("markdown links", () => {
  const base = { repo: "r", ref: "main", path: "docs/README.md" };

  it("resolves relative links against the object's folder, to the UI's object pages", () => {
    expect(resolveLink("guide.md", base)).toBe("/ui/repositories/r/object?ref=main&path=docs%2Fguide.md");
    expect(resolveLink("./a/b%20c.md#part", base)).toBe("/ui/repositories/r/object?ref=main&path=docs%2Fa%2Fb+c.md");
    expect(resolveLink("../data/x.csv", base)).toBe("/ui/repositories/r/object?ref=main&path=data%2Fx.csv");
    expect(resolveLink("/README.md", base)).toBe("/ui/repositories/r/object?ref=main&path=README.md");
    expect(resolveLink("../../..", base)).toBe("/ui/repositories/r/objects?ref=main");
    expect(resolveLink("images/", base)).toBe("/ui/repositories/r/objects?ref=main&path=docs%2Fimages%2F");
  });

  it("leaves absolute links and anchors as they are", () => {
    expect(resolveLink("https://e.com/x.md", base)).toBe("https://e.com/x.md");
    expect(resolveLink("mailto:a@b.c", base)).toBe("mailto:a@b.c");
    expect(resolveLink("#usage", base)).toBe("#usage");
  });

  it("renders relative links resolved and unsafe ones not at all", () => {
    const parser = new MarkdownIt({ html: false });
    parser.validateLink = isSafeLink;
    const [paragraph] = renderTokens(parser.parse("[g](guide.md) [x](javascript:alert(1))", {}), base) as VNode[];
    const links = (paragraph.props.children as (VNode | string)[]).filter((child) => typeof child !== "string") as VNode<{ href?: string }>[];
    expect(links.map((link) => link.props.href)).toEqual(["/ui/repositories/r/object?ref=main&path=docs%2Fguide.md"]);
  });
});

describe("query paging", () => {
  it("starts the next page at the first row not sent", () => {
    expect(nextOffset({ offset: 100, has_more: true, next_offset: 141, rows: [] })).toBe(141);
    expect(nextOffset({ offset: 100, has_more: false, next_offset: null, rows: [[1]] })).toBeNull();
    expect(nextOffset({ offset: 100, has_more: true, rows: Array.from({ length: 100 }, () => [1]) })).toBe(200);
  });
});
