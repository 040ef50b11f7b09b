import MarkdownIt from "markdown-it";
import type { VNode } from "preact";
import { describe, expect, it } from "vitest";
import { diffRefsOf, isComment, languageOf, objectDiffHref } from "../src/pages/diff/diff_links";
import { isSafeLink, renderTokens } from "../src/pages/markdown";

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
