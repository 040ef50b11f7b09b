// A Markdown object rendered: markdown-it parses it (raw HTML off, links only to http(s),
// mailto or relative addresses) and its tokens become Preact elements from a fixed set of tags,
// so nothing in the object is ever turned into markup by the browser.
import MarkdownIt, { type Token } from "markdown-it";
import { type ComponentChild, h } from "preact";
import { objectHref, objectsHref, parentOf } from "./objects_paths";

const SCHEME = /^([a-z][a-z0-9+.-]*):/i;
const ALLOWED_SCHEMES = new Set(["http", "https", "mailto"]);

/** Whether a link may be followed: http(s), mailto, or relative (no scheme at all). */
export function isSafeLink(url: string): boolean {
  // Browsers ignore these in a scheme ("java\tscript:"), so they are no part of a safe link.
  const cleaned = url.trim();
  for (const char of cleaned) {
    const code = char.charCodeAt(0);
    if (code < 0x20 || code === 0x7f) return false;
  }
  const scheme = SCHEME.exec(cleaned);
  return scheme === null || ALLOWED_SCHEMES.has(scheme[1].toLowerCase());
}

/** Where a document's links point: the object it is, so that relative links are other objects. */
export interface LinkBase {
  repo: string;
  ref: string;
  path: string;
}

/** A safe link's href as the UI follows it: one with a scheme (or "//host") or an in-page
 * "#anchor" as it is; a relative one ("guide.md", "../data/", "/README.md" from the
 * repository's root) is resolved against the object's folder and becomes the UI's page of that
 * object or folder, as a relative URL would otherwise land on a UI route that does not exist. */
export function resolveLink(url: string, base: LinkBase): string {
  const cleaned = url.trim();
  if (SCHEME.test(cleaned) || cleaned.startsWith("//") || cleaned.startsWith("#") || cleaned === "") return cleaned;
  const target = cleaned.split(/[?#]/, 1)[0];
  let decoded: string;
  try {
    decoded = decodeURIComponent(target);
  } catch {
    decoded = target;
  }
  const parts = decoded.startsWith("/") ? [] : parentOf(base.path).split("/").filter(Boolean);
  for (const part of decoded.split("/")) {
    if (part === "..") parts.pop();
    else if (part !== "." && part !== "") parts.push(part);
  }
  const path = parts.join("/");
  const folder = path === "" || decoded.endsWith("/") || decoded.endsWith("/.") || decoded.endsWith("/..") || decoded === "." || decoded === "..";
  return folder ? objectsHref(base.repo, base.ref, path === "" ? "" : `${path}/`) : objectHref(base.repo, base.ref, path);
}

const markdown = new MarkdownIt({ html: false, linkify: false, typographer: false });
markdown.validateLink = isSafeLink;

// The tags markdown-it makes of Markdown with HTML off; any other is rendered as its children.
const TAGS = new Set(["p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "em", "strong", "s", "a", "table", "thead", "tbody", "tr", "th", "td"]);

/** An attribute of a token as text (markdown-it types them string | number). */
function attr(token: Token, name: string): string | null {
  const value = token.attrGet(name);
  return value === null ? null : String(value);
}

/** A link's href as rendered: resolved against the document when there is one. */
type Resolve = (url: string) => string;

function attributes(token: Token, resolve: Resolve): Record<string, string> {
  const props: Record<string, string> = {};
  const href = attr(token, "href");
  if (token.tag === "a" && href !== null && isSafeLink(href)) {
    props.href = resolve(href);
    props.rel = "noopener noreferrer nofollow";
  }
  const start = attr(token, "start");
  if (token.tag === "ol" && start !== null && /^\d{1,9}$/.test(start)) props.start = start;
  return props;
}

interface Open {
  token: Token;
  children: ComponentChild[];
}

/** The Preact elements of markdown-it's tokens (block tokens, with inline ones as children). */
export function renderTokens(tokens: Token[], base?: LinkBase): ComponentChild[] {
  const resolve: Resolve = base ? (url) => resolveLink(url, base) : (url) => url;
  const root: ComponentChild[] = [];
  const stack: Open[] = [];
  const add = (child: ComponentChild) => (stack.length ? stack[stack.length - 1].children : root).push(child);
  for (const token of tokens) {
    if (token.type === "inline") {
      renderTokens(token.children ?? [], base).forEach(add);
    } else if (token.nesting === 1) {
      stack.push({ token, children: [] });
    } else if (token.nesting === -1) {
      const open = stack.pop();
      if (!open) continue;
      if (TAGS.has(open.token.tag)) add(h(open.token.tag, attributes(open.token, resolve), ...open.children));
      else open.children.forEach(add);
    } else if (token.type === "text" || token.type === "html_inline" || token.type === "html_block") {
      add(token.content);
    } else if (token.type === "code_inline") {
      add(h("code", null, token.content));
    } else if (token.type === "fence" || token.type === "code_block") {
      add(h("pre", null, h("code", null, token.content)));
    } else if (token.type === "softbreak") {
      add("\n");
    } else if (token.type === "hardbreak") {
      add(h("br", null));
    } else if (token.type === "hr") {
      add(h("hr", null));
    } else if (token.type === "image") {
      // Not loaded (an image from anywhere would tell its server who reads the object): a link.
      const src = attr(token, "src") ?? "";
      const alt = token.content || "image";
      add(isSafeLink(src) ? h("a", { href: resolve(src), rel: "noopener noreferrer nofollow" }, `[image: ${alt}]`) : `[image: ${alt}]`);
    }
  }
  while (stack.length) stack.pop()?.children.forEach(add);
  return root;
}

export function Markdown({ text, base }: { text: string; base?: LinkBase }) {
  return <div class="markdown">{renderTokens(markdown.parse(text, {}), base)}</div>;
}
