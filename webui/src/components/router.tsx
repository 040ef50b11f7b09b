// A tiny client-side router: the UI's paths live under /ui/; a route is a pattern of
// segments where `:name` captures one URL-decoded segment. Query strings carry page state
// (ref, path, cursor) so every view has a shareable URL and survives a reload.
import type { AnchorHTMLAttributes, ComponentChildren, TargetedMouseEvent } from "preact";
import { useEffect, useState } from "preact/hooks";

export const UI_BASE = "/ui";

export type Params = Record<string, string>;

export interface Location {
  /** Path below /ui, starting with "/" ("/repositories/r1/objects"). */
  path: string;
  query: URLSearchParams;
}

export function currentLocation(): Location {
  const full = window.location.pathname;
  const path = full.startsWith(UI_BASE) ? full.slice(UI_BASE.length) || "/" : "/";
  return { path, query: new URLSearchParams(window.location.search) };
}

const NAVIGATED = "silt:navigated";

/** The browser URL of a UI path ("/repositories/x") with an optional query. */
export function href(path: string, query: Record<string, string | undefined> = {}): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value) params.set(name, value);
  const search = params.toString();
  return UI_BASE + path + (search ? "?" + search : "");
}

/** Where to go after signing in: a path of this UI only (never another origin or scheme). */
export function safeNext(next: string | null, origin: string = window.location.origin): string {
  const home = href("/");
  if (!next || !next.startsWith(home) || next.startsWith("//") || next.includes("\\")) return home;
  try {
    const target = new URL(next, origin);
    return target.origin === origin && target.pathname.startsWith(home) ? next : home;
  } catch {
    return home;
  }
}

/** Goes to a browser URL made by href(); `replace` keeps the history entry. */
export function navigate(url: string, replace = false): void {
  if (replace) window.history.replaceState(null, "", url);
  else window.history.pushState(null, "", url);
  window.dispatchEvent(new Event(NAVIGATED));
}

/** The current location, re-rendering on every navigation (links, back/forward). */
export function useLocation(): Location {
  const [location, setLocation] = useState(currentLocation);
  useEffect(() => {
    const update = () => setLocation(currentLocation());
    window.addEventListener("popstate", update);
    window.addEventListener(NAVIGATED, update);
    return () => {
      window.removeEventListener("popstate", update);
      window.removeEventListener(NAVIGATED, update);
    };
  }, []);
  return location;
}

/** The captured parameters if `pattern` ("/repositories/:repo/objects") matches `path`. */
export function match(pattern: string, path: string): Params | null {
  const want = pattern.split("/").filter(Boolean);
  const have = path.split("/").filter(Boolean);
  if (want.length !== have.length) return null;
  const params: Params = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(":")) {
      try {
        params[want[i].slice(1)] = decodeURIComponent(have[i]);
      } catch {
        return null;
      }
    } else if (want[i] !== have[i]) {
      return null;
    }
  }
  return params;
}

type AnchorProps = AnchorHTMLAttributes<HTMLAnchorElement> & { href: string; children?: ComponentChildren };

/** An <a> that navigates inside the app (a plain click) and opens tabs as usual otherwise. */
export function Link(props: AnchorProps) {
  const { href: target, onClick, ...rest } = props;
  const click = (event: TargetedMouseEvent<HTMLAnchorElement>) => {
    if (onClick) (onClick as (e: TargetedMouseEvent<HTMLAnchorElement>) => void)(event);
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    event.preventDefault();
    navigate(target);
  };
  return <a href={target} onClick={click} {...rest} />;
}
