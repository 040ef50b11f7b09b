// Iceberg tables in the object browser: a directory holding the catalog's table pointer is a
// table. Its listing row carries an "Iceberg table" badge (probed only in a namespace's
// directory, for a bounded number of entries), and opening it shows the table (current schema,
// snapshots newest first, properties) read from the pointer and the metadata file through the
// object API, with the plain listing one tab away.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { ApiError, call, messageOf } from "../api";
import { ErrorNote, Loading } from "../components/error_page";
import { formatBytes, formatTime } from "../components/format";
import { Link } from "../components/router";
import { useAsync } from "../components/use_async";
import { MAX_METADATA_BYTES, NAMESPACE_MARKER, TABLE_POINTER, type TableMetadata, parsePointer, parseTableMetadata, totalSize } from "./iceberg_metadata";
import type { ObjectStats } from "./objects";
import { objectHref } from "./objects_paths";
import { objectUrlPath } from "./objects_preview";

// A pointer is a few dozen bytes; more than this is not one.
const POINTER_BYTES = 64 * 1024;
// Entries of a namespace's listing probed for a table pointer, and how many probes at once.
const PROBED_ENTRIES = 100;
const PROBES_AT_ONCE = 6;

/** Up to `limit` bytes of an object as text, and its whole size when the answer says it. */
async function readHead(repo: string, ref: string, path: string, limit: number, signal: AbortSignal) {
  const response = await call(objectUrlPath(repo, ref), { query: { path }, headers: { Range: `bytes=0-${limit}` }, signal });
  const bytes = new Uint8Array(await response.arrayBuffer());
  const size = totalSize(response.headers.get("Content-Range")) ?? bytes.length;
  return { text: new TextDecoder("utf-8").decode(bytes.subarray(0, limit)), size, whole: bytes.length <= limit && size <= limit };
}

/** The metadata file a table's pointer names, or null when there is no live pointer. */
async function readPointer(repo: string, ref: string, directory: string, signal: AbortSignal): Promise<string | null> {
  try {
    const head = await readHead(repo, ref, directory + TABLE_POINTER, POINTER_BYTES, signal);
    return head.whole ? parsePointer(head.text) : null;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

export class MetadataTooLarge extends Error {}

async function readTable(repo: string, ref: string, directory: string, signal: AbortSignal) {
  const key = await readPointer(repo, ref, directory, signal);
  if (key === null) throw new Error(`${directory}${TABLE_POINTER} names no metadata file (a renamed or dropped table leaves such a pointer)`);
  const head = await readHead(repo, ref, key, MAX_METADATA_BYTES, signal);
  if (!head.whole) {
    throw new MetadataTooLarge(`The metadata file is ${formatBytes(head.size)}, over the ${formatBytes(MAX_METADATA_BYTES)} the browser reads; download it instead.`);
  }
  return { key, metadata: parseTableMetadata(head.text) };
}

/** Whether a listing is an Iceberg table's directory (it holds the table's pointer). */
export function isTableDirectory(entries: ObjectStats[], directory: string): boolean {
  return entries.some((item) => item.path_type === "object" && item.path === directory + TABLE_POINTER);
}

/** The subdirectories of a namespace's listing that are tables. Only a namespace's directory is
 * probed (the catalog keeps tables in namespaces), its first entries only, a few at a time. */
export function useTableDirectories(repo: string, ref: string, directory: string, entries: ObjectStats[]): Set<string> {
  const isNamespace = entries.some((item) => item.path_type === "object" && item.path === directory + NAMESPACE_MARKER);
  const candidates = isNamespace ? entries.filter((item) => item.path_type === "common_prefix").slice(0, PROBED_ENTRIES).map((item) => item.path) : [];
  const found = useAsync(
    async (signal) => {
      const tables = new Set<string>();
      const queue = [...candidates];
      const worker = async () => {
        for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
          // A probe that fails leaves its entry a plain directory: the badge is a hint.
          if ((await readPointer(repo, ref, next, signal).catch(() => null)) !== null) tables.add(next);
        }
      };
      await Promise.all(Array.from({ length: Math.min(PROBES_AT_ONCE, queue.length) }, worker));
      return tables;
    },
    [repo, ref, directory, candidates.join("\n")],
  );
  return found.data ?? new Set();
}

export function TableBadge() {
  return (
    <span class="iceberg-badge" data-testid="iceberg-badge" title="An Iceberg table of the repository's catalog">
      <span aria-hidden="true">▦ </span>Iceberg table
    </span>
  );
}

/** A table's directory: the table's view, and its files behind the "Files" tab. */
export function TableTabs({ repo, ref, directory, files }: { repo: string; ref: string; directory: string; files: ComponentChildren }) {
  const [tab, setTab] = useState<"table" | "files">("table");
  return (
    <div class="iceberg-tabs">
      <div role="tablist" aria-label="Iceberg table" class="tabs">
        <button type="button" role="tab" id="iceberg-tab-table" aria-selected={tab === "table"} aria-controls="iceberg-panel" onClick={() => setTab("table")} data-testid="iceberg-tab-table">
          Table
        </button>
        <button type="button" role="tab" id="iceberg-tab-files" aria-selected={tab === "files"} aria-controls="iceberg-panel" onClick={() => setTab("files")} data-testid="iceberg-tab-files">
          Files
        </button>
      </div>
      <div role="tabpanel" id="iceberg-panel" aria-labelledby={tab === "table" ? "iceberg-tab-table" : "iceberg-tab-files"}>
        {tab === "table" ? <TableView repo={repo} ref={ref} directory={directory} /> : files}
      </div>
    </div>
  );
}

function TableView({ repo, ref, directory }: { repo: string; ref: string; directory: string }) {
  const table = useAsync((signal) => readTable(repo, ref, directory, signal), [repo, ref, directory]);
  if (table.loading) return <Loading what="table metadata" />;
  if (table.error instanceof MetadataTooLarge || table.error instanceof SyntaxError) {
    return (
      <p class="note" role="alert" data-testid="iceberg-refused">
        {table.error instanceof SyntaxError ? `The metadata file is not JSON: ${messageOf(table.error)}` : table.error.message}
      </p>
    );
  }
  if (table.error !== undefined) return <ErrorNote error={table.error} repo={repo} />;
  if (!table.data) return null;
  return <TableDetails repo={repo} ref={ref} metadataKey={table.data.key} metadata={table.data.metadata} />;
}

function TableDetails({ repo, ref, metadataKey, metadata }: { repo: string; ref: string; metadataKey: string; metadata: TableMetadata }) {
  return (
    <section class="iceberg-table" data-testid="iceberg-table" aria-label="Iceberg table">
      <p class="note">
        <TableBadge /> format version {metadata.formatVersion ?? "?"}, current metadata{" "}
        <Link href={objectHref(repo, ref, metadataKey)} data-testid="iceberg-metadata-link">
          {metadataKey.slice(metadataKey.lastIndexOf("/") + 1)}
        </Link>
        {metadata.location && (
          <>
            , location <code>{metadata.location}</code>
          </>
        )}
      </p>
      <h3>Schema{metadata.schemaId !== null ? ` (id ${metadata.schemaId})` : ""}</h3>
      <table class="listing" data-testid="iceberg-schema">
        <thead>
          <tr>
            <th>Field id</th>
            <th>Name</th>
            <th>Type</th>
            <th>Required</th>
          </tr>
        </thead>
        <tbody>
          {metadata.fields.map((field) => (
            <tr key={`${field.id}-${field.name}`} data-testid="iceberg-field">
              <td>{field.id ?? ""}</td>
              <td>{field.name}</td>
              <td>
                <code>{field.type}</code>
              </td>
              <td>{field.required ? "required" : "optional"}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>Snapshots ({metadata.snapshots.length})</h3>
      {metadata.snapshots.length === 0 ? (
        <p class="empty">No snapshot yet: the table holds no data.</p>
      ) : (
        <table class="listing" data-testid="iceberg-snapshots">
          <thead>
            <tr>
              <th>Snapshot id</th>
              <th>Time</th>
              <th>Operation</th>
              <th>Added records</th>
              <th>Deleted records</th>
              <th>Total records</th>
            </tr>
          </thead>
          <tbody>
            {metadata.snapshots.map((snapshot) => (
              <tr key={snapshot.id} data-testid="iceberg-snapshot">
                <td>
                  <code>{snapshot.id}</code>
                  {snapshot.current && <span class="read-only-badge"> current</span>}
                </td>
                <td>{snapshot.timestampMs === null ? "" : formatTime(snapshot.timestampMs / 1000)}</td>
                <td>{snapshot.operation}</td>
                <td>{snapshot.addedRecords}</td>
                <td>{snapshot.deletedRecords}</td>
                <td>{snapshot.totalRecords}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Properties</h3>
      {metadata.properties.length === 0 ? (
        <p class="empty">No properties.</p>
      ) : (
        <table class="details" data-testid="iceberg-properties">
          <tbody>
            {metadata.properties.map(([key, value]) => (
              <tr key={key}>
                <th>
                  <code>{key}</code>
                </th>
                <td>{value}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
