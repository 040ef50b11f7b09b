// Previews of an object: text and CSV from its first 64 KiB (a Range request), Markdown rendered
// (markdown.tsx) or raw, images from the object URL, Parquet's schema and first rows from the
// API's bounded preview endpoint.
import { useState } from "preact/hooks";
import { api, call, seg } from "../api";
import { ErrorNote, Loading } from "../components/error_page";
import { formatBytes } from "../components/format";
import { useAsync } from "../components/use_async";
import { Markdown } from "./markdown";
import { parseCsv } from "./objects_csv";

export const PREVIEW_BYTES = 64 * 1024;
// Rows of a CSV preview shown as a table; the rest of the 64 KiB is not rendered.
const CSV_ROWS = 200;

export type PreviewKind = "parquet" | "csv" | "image" | "text" | "none";

const TEXT_EXTENSIONS = ["txt", "md", "json", "jsonl", "ndjson", "log", "yaml", "yml", "xml", "html", "htm", "py", "sql", "toml", "ini", "cfg", "sh", "js", "ts"];
const IMAGE_EXTENSIONS = ["png", "jpg", "jpeg", "gif", "webp", "bmp", "svg"];

function extension(path: string): string {
  const name = path.slice(path.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  return dot < 0 ? "" : name.slice(dot + 1).toLowerCase();
}

export function previewKind(path: string, contentType: string): PreviewKind {
  const ext = extension(path);
  const type = contentType.split(";")[0].trim().toLowerCase();
  if (ext === "parquet" || type.includes("parquet")) return "parquet";
  if (ext === "csv" || ext === "tsv" || type === "text/csv" || type === "text/tab-separated-values") return "csv";
  if (type.startsWith("image/") || IMAGE_EXTENSIONS.includes(ext)) return "image";
  if (type.startsWith("text/") || type === "application/json" || type.endsWith("+json") || type.endsWith("+xml") || TEXT_EXTENSIONS.includes(ext)) {
    return "text";
  }
  return "none";
}

export function objectUrlPath(repo: string, ref: string): string {
  return `/repositories/${seg(repo)}/refs/${seg(ref)}/objects`;
}

interface Head {
  text: string;
  truncated: boolean;
}

export async function firstBytes(repo: string, ref: string, path: string, size: number, signal: AbortSignal): Promise<Head> {
  if (size === 0) return { text: "", truncated: false };
  const response = await call(objectUrlPath(repo, ref), {
    query: { path },
    headers: { Range: `bytes=0-${PREVIEW_BYTES - 1}` },
    signal,
  });
  const bytes = new Uint8Array(await response.arrayBuffer());
  // A cut inside a multi-byte character decodes to one replacement character at the end.
  return { text: new TextDecoder("utf-8").decode(bytes), truncated: size > bytes.length };
}

export function Preview(props: { repo: string; ref: string; path: string; size: number; contentType: string; url: string }) {
  const kind = previewKind(props.path, props.contentType);
  if (kind === "none") return <p class="note">No preview for this type ({props.contentType}); download it instead.</p>;
  if (kind === "image") {
    return (
      <div class="preview" data-testid="preview-image" tabIndex={0} role="region" aria-label="Preview">
        <img src={props.url} alt={props.path} />
      </div>
    );
  }
  if (kind === "parquet") return <ParquetPreview {...props} />;
  return <TextPreview {...props} csv={kind === "csv"} />;
}

/** Whether a path is a Markdown document (rendered on its page). */
export function isMarkdown(path: string): boolean {
  return ["md", "markdown"].includes(extension(path));
}

function TextPreview(props: { repo: string; ref: string; path: string; size: number; csv: boolean }) {
  const [raw, setRaw] = useState(false);
  const head = useAsync((signal) => firstBytes(props.repo, props.ref, props.path, props.size, signal), [props.repo, props.ref, props.path]);
  if (head.loading) return <Loading what="preview" />;
  if (head.error || !head.data) return <ErrorNote error={head.error} />;
  const note = head.data.truncated ? <p class="note">First {formatBytes(PREVIEW_BYTES)} of {formatBytes(props.size)}.</p> : null;
  if (!props.csv && isMarkdown(props.path)) {
    return (
      <div data-testid={raw ? "preview-text" : "preview-markdown"}>
        <p class="toolbar">
          <button type="button" aria-pressed={!raw} onClick={() => setRaw(false)}>
            Rendered
          </button>
          <button type="button" aria-pressed={raw} onClick={() => setRaw(true)}>
            Raw
          </button>
        </p>
        {note}
        {raw ? <pre class="preview" tabIndex={0} role="region" aria-label="Raw text">{head.data.text}</pre> : <Markdown text={head.data.text} base={{ repo: props.repo, ref: props.ref, path: props.path }} />}
      </div>
    );
  }
  if (!props.csv) {
    return (
      <div class="preview" data-testid="preview-text" tabIndex={0} role="region" aria-label="Preview">
        {note}
        <pre>{head.data.text}</pre>
      </div>
    );
  }
  const delimiter = extension(props.path) === "tsv" ? "\t" : ",";
  const rows = parseCsv(head.data.text, head.data.truncated, delimiter);
  const [header, ...body] = rows;
  return (
    <div class="preview" data-testid="preview-csv" tabIndex={0} role="region" aria-label="Preview">
      {note}
      {body.length > CSV_ROWS && <p class="note">First {CSV_ROWS} rows shown.</p>}
      <table>
        <thead>
          <tr>{header?.map((name, index) => <th key={index}>{name}</th>)}</tr>
        </thead>
        <tbody>
          {body.slice(0, CSV_ROWS).map((row, index) => (
            <tr key={index}>
              {row.map((cell, column) => (
                <td key={column}>{cell}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

interface ParquetPreviewAnswer {
  schema: { name: string; type: string }[];
  rows: unknown[][];
  total_rows: number;
  row_groups: number;
  bytes_read: number;
  /** How many columns the file has; the schema lists the first of them only. */
  columns?: number;
}

/** A Parquet preview cell (a JSON value) as text: nested values as JSON. */
/** A table's rows of decoded cells (a Parquet preview's, a query's page), each cell as text. */
export function CellRows({ rows }: { rows: unknown[][] }) {
  return (
    <tbody>
      {rows.map((row, index) => (
        <tr key={index}>
          {row.map((cell, column) => (
            <td key={column}>{cellText(cell)}</td>
          ))}
        </tr>
      ))}
    </tbody>
  );
}

export function cellText(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  return JSON.stringify(value);
}

function ParquetPreview(props: { repo: string; ref: string; path: string }) {
  const preview = useAsync(
    (signal) => api.get<ParquetPreviewAnswer>(`${objectUrlPath(props.repo, props.ref)}/preview`, { path: props.path }, signal),
    [props.repo, props.ref, props.path],
  );
  if (preview.loading) return <Loading what="preview" />;
  if (preview.error || !preview.data) return <ErrorNote error={preview.error} />;
  const { schema, rows, total_rows: total, row_groups: groups, columns } = preview.data;
  const hidden = (columns ?? schema.length) - schema.length;
  return (
    <div class="preview" data-testid="preview-parquet" tabIndex={0} role="region" aria-label="Preview">
      <h4>Schema</h4>
      <table class="schema">
        <thead>
          <tr>
            <th>Column</th>
            <th>Type</th>
          </tr>
        </thead>
        <tbody>
          {schema.map((field, column) => (
            <tr key={column}>
              <td>{field.name}</td>
              <td>
                <code>{field.type}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {hidden > 0 && <p data-testid="preview-more-columns">{hidden} more columns not shown</p>}
      <h4>
        First {rows.length} of {total} rows ({groups} row group{groups === 1 ? "" : "s"})
      </h4>
      <table>
        <thead>
          <tr>{schema.map((field, column) => <th key={column}>{field.name}</th>)}</tr>
        </thead>
        <CellRows rows={rows} />
      </table>
    </div>
  );
}
