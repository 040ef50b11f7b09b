// Uploading files into a directory of a branch, two ways: the Upload form (choose files and a
// prefix), and dropping files onto the listing. Both go through one queue: each file is its own
// multipart POST (upload_xhr.ts), one after another, with a progress bar and its own error;
// the listing is refreshed once the queue is empty if anything was uploaded.
import type { ComponentChildren } from "preact";
import { useRef, useState } from "preact/hooks";
import { ErrorNote } from "../components/error_page";
import { formatBytes } from "../components/format";
import { uploadWithProgress } from "./upload_xhr";

// Files of one drop or form, at most: beyond that, an import is the tool (docs/import.md).
export const MAX_FILES = 200;

export interface UploadItem {
  key: number;
  path: string;
  size: number;
  sent: number;
  state: "queued" | "uploading" | "done" | "failed";
  /** Why it failed: the API's refusal, shown with its cause (ErrorNote). */
  error?: unknown;
}

/** The upload queue of a directory page. */
function useUploads(repo: string, branch: string, onUploaded: (failed: number) => void) {
  const [items, setItems] = useState<UploadItem[]>([]);
  const queue = useRef<{ key: number; path: string; file: File }[]>([]);
  const running = useRef(false);
  const uploaded = useRef(0);
  const failed = useRef(0);
  const nextKey = useRef(0);
  const update = (key: number, change: Partial<UploadItem>) =>
    setItems((previous) => previous.map((item) => (item.key === key ? { ...item, ...change } : item)));

  const drain = async () => {
    if (running.current) return;
    running.current = true;
    for (let job = queue.current.shift(); job; job = queue.current.shift()) {
      const { key, path, file } = job;
      update(key, { state: "uploading" });
      try {
        await uploadWithProgress(repo, branch, path, file, (sent) => update(key, { sent }));
        update(key, { state: "done", sent: file.size });
        uploaded.current += 1;
      } catch (failure) {
        update(key, { state: "failed", error: failure });
        failed.current += 1;
      }
    }
    running.current = false;
    const [done, refused] = [uploaded.current, failed.current];
    uploaded.current = failed.current = 0;
    if (done > 0) onUploaded(refused);
  };

  /** Queues files under `prefix`; false (nothing queued) when there are too many. */
  const add = (files: File[], prefix: string): boolean => {
    if (files.length === 0 || files.length > MAX_FILES) return false;
    const added = files.map((file) => ({ key: nextKey.current++, path: prefix + file.name, file }));
    queue.current.push(...added);
    setItems((previous) => [
      ...previous.filter((item) => item.state !== "done"),
      ...added.map(({ key, path, file }) => ({ key, path, size: file.size, sent: 0, state: "queued" as const })),
    ]);
    void drain();
    return true;
  };
  const busy = items.some((item) => item.state === "queued" || item.state === "uploading");
  return { items, add, busy, clear: () => setItems((previous) => previous.filter((item) => item.state === "uploading" || item.state === "queued")) };
}

function UploadList({ items, onClear, repo }: { items: UploadItem[]; onClear: () => void; repo: string }) {
  if (items.length === 0) return null;
  return (
    <div class="upload-list card" data-testid="upload-list" aria-live="polite">
      <ul>
        {items.map((item) => (
          <li key={item.key} class={`upload-item ${item.state}`} data-testid="upload-item" data-state={item.state}>
            <span class="upload-path">{item.path}</span>
            {item.state === "failed" ? (
              <span class="upload-failed" data-testid="upload-failed">
                failed
              </span>
            ) : (
              <progress max={Math.max(item.size, 1)} value={item.state === "done" ? Math.max(item.size, 1) : item.sent} aria-label={`upload of ${item.path}`} />
            )}
            <div class="upload-status">
              {item.state === "failed" ? (
                <ErrorNote error={item.error} repo={repo} />
              ) : item.state === "done"
                  ? `${formatBytes(item.size)} uploaded`
                  : item.state === "queued"
                    ? "waiting"
                    : `${formatBytes(item.sent)} of ${formatBytes(item.size)}`
              }
            </div>
          </li>
        ))}
      </ul>
      <button type="button" class="link" onClick={onClear}>
        Clear finished
      </button>
    </div>
  );
}

/** The listing of a branch's directory as a drop target, with the queue's progress above it. */
export function UploadDropZone(props: {
  enabled: boolean;
  repo: string;
  branch: string;
  prefix: string;
  onUploaded: () => void;
  children: ComponentChildren;
}) {
  const uploads = useUploads(props.repo, props.branch, props.onUploaded);
  const [over, setOver] = useState(false);
  const [refused, setRefused] = useState("");
  if (!props.enabled) return <>{props.children}</>;
  const hasFiles = (event: DragEvent) => Array.from(event.dataTransfer?.types ?? []).includes("Files");
  return (
    <div
      class={over ? "drop-zone over" : "drop-zone"}
      data-testid="drop-zone"
      onDragOver={(event) => {
        if (!hasFiles(event)) return;
        event.preventDefault(); // without it the browser opens the file instead
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(event) => {
        if (!hasFiles(event)) return;
        event.preventDefault();
        setOver(false);
        const files = Array.from(event.dataTransfer?.files ?? []);
        setRefused(uploads.add(files, props.prefix) ? "" : `Drop at most ${MAX_FILES} files at once (folders are not uploaded).`);
      }}
    >
      <p class="hint drop-hint">Drop files here to upload them into {props.prefix || "the root"} on {props.branch}.</p>
      {refused && (
        <p class="error-note" role="alert">
          {refused}
        </p>
      )}
      <UploadList items={uploads.items} onClear={uploads.clear} repo={props.repo} />
      <UploadSummary items={uploads.items} />
      {props.children}
    </div>
  );
}

export function UploadForm(props: { repo: string; branch: string; prefix: string; onUploaded: () => void }) {
  const [files, setFiles] = useState<File[]>([]);
  const [prefix, setPrefix] = useState(props.prefix);
  // The form closes (the page's onUploaded) only when every file went up; otherwise it stays,
  // each failure shown beside its file.
  const uploads = useUploads(props.repo, props.branch, (refused) => refused === 0 && props.onUploaded());
  const submit = (event: Event) => {
    event.preventDefault();
    uploads.add(files, prefix);
  };
  return (
    <form class="card upload" onSubmit={submit} data-testid="upload-form">
      <label>
        Files
        <input type="file" multiple name="files" onChange={(event) => setFiles(Array.from(event.currentTarget.files ?? []).slice(0, MAX_FILES))} />
      </label>
      <label>
        Into directory (prefix) on branch {props.branch}
        <input name="prefix" maxLength={1024} value={prefix} onInput={(event) => setPrefix(event.currentTarget.value)} />
      </label>
      <UploadList items={uploads.items} onClear={uploads.clear} repo={props.repo} />
      <UploadSummary items={uploads.items} />
      <button type="submit" class="primary" disabled={files.length === 0 || uploads.busy}>
        Upload
      </button>
    </form>
  );
}

/** How the finished uploads went, counted: never "the others were uploaded" when none was. */
export function uploadSummary(items: readonly Pick<UploadItem, "state">[]): string {
  if (items.some((item) => item.state === "queued" || item.state === "uploading")) return "";
  const failed = items.filter((item) => item.state === "failed").length;
  if (failed === 0) return "";
  const done = items.filter((item) => item.state === "done").length;
  const files = (n: number) => `${n} file${n === 1 ? "" : "s"}`;
  if (done === 0) return `Nothing was uploaded: ${failed === 1 ? "the file was" : `all ${files(failed)} were`} refused.`;
  return `${files(failed)} failed; ${files(done)} uploaded.`;
}

function UploadSummary({ items }: { items: readonly UploadItem[] }) {
  const summary = uploadSummary(items);
  if (!summary) return null;
  return (
    <p class="error-note" role="alert" data-testid="upload-summary">
      {summary}
    </p>
  );
}
