// Copy a path's addresses: lakeFS's URI, the S3 URI clients use with the gateway, and the
// gateway's HTTP URL (the gateway serves S3 on this very origin, beside the API and the UI).
import { useEffect, useRef, useState } from "preact/hooks";

export interface Uris {
  lakefs: string;
  s3: string;
  http: string;
}

export function urisOf(repo: string, ref: string, path: string, origin: string = window.location.origin): Uris {
  const encoded = [repo, ref, ...path.split("/")].map(encodeURIComponent).join("/");
  return {
    lakefs: `lakefs://${repo}/${ref}/${path}`,
    s3: `s3://${repo}/${ref}/${path}`,
    http: `${origin}/${encoded}`,
  };
}

/** Puts text on the clipboard: the Clipboard API where the page may use it, else a selected
 * text area and the legacy copy command (plain http, older browsers). */
export async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return;
    } catch {
      // Permission refused: the fallback below may still work.
    }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  // Selecting the text area takes the focus: it goes back where it was (a menu's button).
  const focused = document.activeElement instanceof HTMLElement ? document.activeElement : null;
  document.body.appendChild(area);
  area.select();
  try {
    if (!document.execCommand("copy")) throw new Error("the browser refused to copy");
  } finally {
    area.remove();
    focused?.focus();
  }
}

const LABELS: [keyof Uris, string][] = [
  ["lakefs", "lakefs:// URI"],
  ["s3", "s3:// URI"],
  ["http", "S3 gateway URL"],
];

/** A "Copy" button that opens a menu of the path's URIs. The menu is in the page only while
 * open: a listing shows one per row, and a closed <details> per row made Chromium lay out each
 * row's hidden menu on its own whenever anything measured the page (docs/testing.md). */
export function CopyUris({ repo, ref, path, compact = false }: { repo: string; ref: string; path: string; compact?: boolean }) {
  const [open, setOpen] = useState(false);
  const [copied, copy, forget] = useCopy();
  const wrapper = useRef<HTMLDivElement>(null);
  const toggle = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (!open) return;
    // Escape is heard on the document, not the menu: a click does not focus a button in every
    // browser, so the key may come from anywhere while the menu is open.
    const onKey = (event: KeyboardEvent) => {
      if (event.key !== "Escape") return;
      setOpen(false);
      toggle.current?.focus();
    };
    // A click elsewhere closes it, so that open menus never pile up over the rows below.
    const onPointer = (event: PointerEvent) => {
      if (!(event.target instanceof Node && wrapper.current?.contains(event.target))) setOpen(false);
    };
    document.addEventListener("keydown", onKey);
    document.addEventListener("pointerdown", onPointer);
    return () => {
      document.removeEventListener("keydown", onKey);
      document.removeEventListener("pointerdown", onPointer);
    };
  }, [open]);
  const uris = open ? urisOf(repo, ref, path) : undefined;
  return (
    <div class="copy-uris" data-testid="copy-uris" ref={wrapper}>
      <button
        type="button"
        ref={toggle}
        class="copy-toggle"
        aria-label={`Copy URI of ${path}`}
        aria-expanded={open}
        onClick={() => {
          setOpen(!open);
          forget();
        }}
        data-testid="copy-toggle"
      >
        {compact ? "Copy" : "Copy URI"}
      </button>
      {uris && (
        <div class="copy-menu" role="group" aria-label={`URIs of ${path}`}>
          {LABELS.map(([kind, label]) => (
            <button type="button" key={kind} title={uris[kind]} onClick={() => void copy(uris[kind], `Copied ${label}`)} data-testid={`copy-${kind}`}>
              {label}
            </button>
          ))}
          <CopyNote copied={copied} />
        </div>
      )}
    </div>
  );
}

/** One value copied by one button (a commit id): the value is the button's data-value, and a
 * note beside it says whether the browser took it. */
export function CopyButton({ value, label, testId }: { value: string; label: string; testId?: string }) {
  const [copied, copy] = useCopy();
  return (
    <>
      <button type="button" class="copy-button" title={value} data-value={value} data-testid={testId} onClick={() => void copy(value, "Copied")}>
        {label}
      </button>
      <CopyNote copied={copied} />
    </>
  );
}

/** The note of the last copy (`done`, or why the browser refused), a function that copies, and
 * one that forgets the note. */
function useCopy(): [string, (text: string, done: string) => Promise<void>, () => void] {
  const [copied, setCopied] = useState("");
  const copy = async (text: string, done: string) => {
    try {
      await copyText(text);
      setCopied(done);
    } catch (error) {
      setCopied(`Could not copy: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  return [copied, copy, () => setCopied("")];
}

/** A live region that is in the page before its text: screen readers announce a change of its
 * text, not a region that appears with it. */
function CopyNote({ copied }: { copied: string }) {
  return (
    <span class="note" role="status">
      {copied}
    </span>
  );
}
