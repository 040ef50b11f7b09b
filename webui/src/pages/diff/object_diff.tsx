// One object compared between two refs: both sides' metadata, then by kind a table's schema
// change and changed rows (paired on a key column the API detects or the user picks, else on
// their content, or by position as the user may ask), a text's unified
// diff, or two images side by side. Large objects are compared on a sample the page states.
import { apiUrl } from "../../api";
import { ErrorPage, Loading } from "../../components/error_page";
import { formatBytes, formatTime } from "../../components/format";
import { Link, navigate } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { objectHref } from "../objects_paths";
import { cellText, objectUrlPath } from "../objects_preview";
import { type Column, type DiffRowChange, type ObjectDiffAnswer, type Side, getObjectDiff } from "./diff_api";
import { type DiffType, type RowMatch, isComment, languageOf, objectDiffHref, shortRef } from "./diff_links";

export interface ObjectDiffProps {
  repo: string;
  left: string;
  right: string;
  path: string;
  /** three_dot compares the refs' merge base with `right` (what `right` changed). */
  type: DiffType;
  /** The key column of a table diff ("": none asked for, rows are paired as `match` says). */
  keyColumn: string;
  match: RowMatch;
}

/** The URL's row matching: anything unknown is the default. */
export function rowMatch(value: string | null): RowMatch {
  return value === "content" || value === "position" ? value : "auto";
}

export function ObjectDiff(props: ObjectDiffProps) {
  const { repo, left, right, path, type, keyColumn, match } = props;
  const diff = useAsync((signal) => getObjectDiff(repo, left, right, path, type, keyColumn, match, signal), [repo, left, right, path, type, keyColumn, match]);
  return (
    <section class="object-diff" data-testid="object-diff">
      <div class="toolbar">
        <h2 class="object-name">
          <code>{path}</code>
        </h2>
        <span class="diff-refs">
          {type === "three_dot" && "changes of "}
          <code title={right}>{shortRef(right)}</code> {type === "three_dot" ? "since it left " : "against "}
          <code title={left}>{shortRef(left)}</code>
        </span>
      </div>
      {diff.loading && <Loading what="diff" />}
      {diff.error !== undefined && <ErrorPage error={diff.error} />}
      {diff.data && <DiffBody {...props} answer={diff.data} />}
    </section>
  );
}

function DiffBody(props: ObjectDiffProps & { answer: ObjectDiffAnswer }) {
  const { answer } = props;
  return (
    <>
      <Metadata repo={props.repo} path={props.path} left={answer.left} right={answer.right} />
      {answer.identical && (
        <p class="note" data-testid="diff-identical">
          Both versions are the same object (same checksum).
        </p>
      )}
      {!answer.identical && answer.kind === "image" && <Images repo={props.repo} path={props.path} left={answer.left} right={answer.right} />}
      {!answer.identical && answer.kind === "binary" && <p class="note">No content diff for this type: compare the metadata above.</p>}
      {!answer.identical && answer.kind === "text" && <TextDiff answer={answer} path={props.path} />}
      {!answer.identical && (answer.kind === "csv" || answer.kind === "tsv" || answer.kind === "parquet") && <TableDiff {...props} />}
    </>
  );
}

function sideValue(side: Side, field: "size" | "checksum" | "type" | "mtime"): string {
  if (!side.exists) return "—";
  if (field === "size") return `${formatBytes(side.size_bytes ?? 0)} (${side.size_bytes ?? 0} bytes)`;
  if (field === "checksum") return side.checksum ?? "";
  if (field === "type") return side.content_type ?? "";
  return formatTime(side.mtime);
}

function Metadata({ repo, path, left, right }: { repo: string; path: string; left: Side; right: Side }) {
  const fields: [string, "size" | "checksum" | "type" | "mtime"][] = [
    ["Size", "size"],
    ["Checksum", "checksum"],
    ["Content type", "type"],
    ["Modified", "mtime"],
  ];
  const keys = [...new Set([...Object.keys(left.metadata ?? {}), ...Object.keys(right.metadata ?? {})])].sort();
  const cell = (side: Side) =>
    side.exists ? (
      <Link href={objectHref(repo, side.ref, path)} title={side.ref}>
        {shortRef(side.ref)}
      </Link>
    ) : (
      <span class="muted">{shortRef(side.ref)} (absent)</span>
    );
  return (
    <table class="details diff-metadata" data-testid="diff-metadata">
      <thead>
        <tr>
          <th />
          <th>{cell(left)}</th>
          <th>{cell(right)}</th>
        </tr>
      </thead>
      <tbody>
        {fields.map(([title, field]) => {
          const [a, b] = [sideValue(left, field), sideValue(right, field)];
          return (
            <tr key={field} class={a !== b ? "differs" : undefined}>
              <th>{title}</th>
              <td>{a}</td>
              <td>{b}</td>
            </tr>
          );
        })}
        {keys.map((key) => {
          const [a, b] = [left.metadata?.[key] ?? "—", right.metadata?.[key] ?? "—"];
          return (
            <tr key={`m-${key}`} class={a !== b ? "differs" : undefined}>
              <th>
                metadata <code>{key}</code>
              </th>
              <td>{a}</td>
              <td>{b}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function Images({ repo, path, left, right }: { repo: string; path: string; left: Side; right: Side }) {
  const image = (side: Side) =>
    side.exists ? <img src={apiUrl(objectUrlPath(repo, side.ref), { path })} alt={`${path} at ${side.ref}`} /> : <p class="note">Absent at {shortRef(side.ref)}.</p>;
  return (
    <div class="diff-images" data-testid="diff-images">
      <figure>
        {image(left)}
        <figcaption>{shortRef(left.ref)}</figcaption>
      </figure>
      <figure>
        {image(right)}
        <figcaption>{shortRef(right.ref)}</figcaption>
      </figure>
    </div>
  );
}

function mib(bytes: number): string {
  return formatBytes(bytes);
}

/** "Compared the first N rows (X MiB) of each side", when a side was cut. */
function SampleNote({ answer, unit }: { answer: ObjectDiffAnswer; unit: "rows" | "lines" }) {
  const sample = answer.sample;
  if (!sample) return null;
  const sides = [sample.left, sample.right].filter((side) => side !== null);
  if (sides.every((side) => side.complete)) return null;
  const count = unit === "rows" ? Math.max(...sides.map((side) => side.rows)) : Math.max(...sides.map((side) => side.lines));
  return (
    <p class="note sample-note" data-testid="diff-sample">
      Large object: compared the first {count.toLocaleString()} {unit} (at most {mib(sample.limit_bytes)}) of each side; counts cover that sample only.
    </p>
  );
}

function TextDiff({ answer, path }: { answer: ObjectDiffAnswer; path: string }) {
  const language = languageOf(path);
  const counts = answer.counts ?? { added: 0, removed: 0 };
  return (
    <div class="text-diff" data-testid="text-diff">
      <p class="diff-counts">
        <span class="change change-added">+{counts.added}</span> <span class="change change-removed">−{counts.removed}</span> lines
      </p>
      <SampleNote answer={answer} unit="lines" />
      {(answer.hunks ?? []).length === 0 && <p class="note">No line differs (the objects differ in bytes only, such as line endings).</p>}
      <table class={`diff-lines lang-${language}`}>
        <tbody>
          {(answer.hunks ?? []).map((hunk, index) => [
            <tr key={`h${index}`} class="hunk">
              <td colSpan={3}>
                @@ −{hunk.left_start} +{hunk.right_start} @@
              </td>
            </tr>,
            ...hunk.lines.map((line, at) => (
              <tr
                key={`${index}-${at}`}
                class={`diff-line ${line.op === "+" ? "line-added" : line.op === "-" ? "line-removed" : "line-context"}${isComment(language, line.text) ? " line-comment" : ""}`}
                data-testid={line.op === "+" ? "line-added" : line.op === "-" ? "line-removed" : undefined}
              >
                <td class="line-number">{line.left ?? ""}</td>
                <td class="line-number">{line.right ?? ""}</td>
                <td class="line-text">
                  <code>
                    {line.op} {line.text}
                  </code>
                </td>
              </tr>
            )),
          ])}
        </tbody>
      </table>
      {answer.truncated && <p class="note">The diff is cut here: more lines changed than are shown.</p>}
    </div>
  );
}

function KeyPicker(props: ObjectDiffProps & { columns: string[]; answer: ObjectDiffAnswer }) {
  const { answer } = props;
  // One select for both: "match:<how>" without a key, "key:<column>" with one.
  const value = props.keyColumn ? `key:${props.keyColumn}` : `match:${props.match}`;
  const detected = answer.key_detected && answer.key ? `a detected key: ${answer.key}` : answer.match === "content" ? "their content (no key column found)" : "a detected key, else their content";
  const choose = (chosen: string) => {
    const [kind, ...rest] = chosen.split(":");
    const name = rest.join(":");
    navigate(objectDiffHref(props.repo, props.left, props.right, props.path, props.type, kind === "key" ? name : undefined, kind === "match" ? rowMatch(name) : undefined));
  };
  return (
    <label class="inline key-picker">
      Match rows on
      <select aria-label="key column" value={value} data-match={answer.match} onChange={(event) => choose((event.target as HTMLSelectElement).value)}>
        <option value="match:auto">{detected}</option>
        <option value="match:content">their content</option>
        <option value="match:position">their position</option>
        {props.columns.map((name) => (
          <option key={name} value={`key:${name}`}>
            key column {name}
          </option>
        ))}
      </select>
    </label>
  );
}

function SchemaChange({ schema }: { schema: NonNullable<ObjectDiffAnswer["schema"]> }) {
  const none = schema.added.length + schema.removed.length + schema.changed.length === 0;
  return (
    <div class="schema-change" data-testid="schema-change">
      <h3>Schema</h3>
      {none && <p class="note">Same columns and types on both sides.</p>}
      <ul>
        {schema.added.map((column) => (
          <li key={`a-${column.name}`}>
            <span class="change change-added">added</span> <code>{column.name}</code> {column.type}
          </li>
        ))}
        {schema.removed.map((column) => (
          <li key={`r-${column.name}`}>
            <span class="change change-removed">removed</span> <code>{column.name}</code> {column.type}
          </li>
        ))}
        {schema.changed.map((column) => (
          <li key={`c-${column.name}`}>
            <span class="change change-changed">type changed</span> <code>{column.name}</code> {column.left} → {column.right}
          </li>
        ))}
      </ul>
    </div>
  );
}

function TableDiff(props: ObjectDiffProps & { answer: ObjectDiffAnswer }) {
  const { answer } = props;
  const schema = answer.schema ?? { left: [], right: [], added: [], removed: [], changed: [] };
  const leftColumns = schema.left.length ? schema.left : schema.right;
  const rightColumns = schema.right.length ? schema.right : schema.left;
  const rightNames = new Set(rightColumns.map((column) => column.name));
  // Every column of either side: the right side's order, then those only the left side has.
  const shown: Column[] = [...rightColumns, ...leftColumns.filter((column) => !rightNames.has(column.name))];
  const common = leftColumns.map((column) => column.name).filter((name) => rightNames.has(name));
  const counts = answer.counts ?? { added: 0, removed: 0, changed: 0, unchanged: 0 };
  const rows = answer.rows ?? [];
  const listed = counts.added + counts.removed + (counts.changed ?? 0);
  return (
    <div class="table-diff" data-testid="table-diff">
      <SchemaChange schema={schema} />
      <h3>Rows</h3>
      <div class="toolbar">
        <KeyPicker {...props} columns={common} />
        <span class="diff-counts" data-testid="diff-counts">
          <span class="change change-added">{counts.added} added</span> <span class="change change-removed">{counts.removed} removed</span>{" "}
          <span class="change change-changed">{counts.changed ?? 0} changed</span> <span class="muted">{counts.unchanged ?? 0} unchanged</span>
        </span>
      </div>
      <SampleNote answer={answer} unit="rows" />
      {rows.length === 0 ? (
        <p class="empty">No row differs{answer.key ? ` on key ${answer.key}` : ""}.</p>
      ) : (
        <div class="preview" tabIndex={0} role="region" aria-label="Diff">
          {listed > rows.length && <p class="note">First {rows.length} of {listed} differing rows.</p>}
          <table class="row-diff" data-testid="row-diff">
            <thead>
              <tr>
                <th>Change</th>
                <th>{answer.key ? "" : "Row"}</th>
                {shown.map((column) => (
                  <th key={column.name}>{column.name}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {rows.map((row, index) => (
                <RowChange key={index} row={row} shown={shown} left={leftColumns} right={rightColumns} byKey={Boolean(answer.key)} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

function RowChange({ row, shown, left, right, byKey }: { row: DiffRowChange; shown: Column[]; left: Column[]; right: Column[]; byKey: boolean }) {
  const value = (columns: Column[], values: (string | null)[] | undefined, name: string): string | undefined => {
    const index = columns.findIndex((column) => column.name === name);
    return index < 0 || !values ? undefined : cellText(values[index]);
  };
  return (
    <tr class={`row-${row.change}`} data-testid={`row-${row.change}`}>
      <td>
        <span class={`change change-${row.change}`}>{row.change}</span>
      </td>
      <td class="muted">{byKey ? "" : row.position + 1}</td>
      {shown.map((column) => {
        const before = value(left, row.left, column.name);
        const after = value(right, row.right, column.name);
        if (row.change === "changed" && row.columns?.includes(column.name)) {
          return (
            <td key={column.name} class="cell-changed">
              <del>{before}</del> <ins>{after}</ins>
            </td>
          );
        }
        return <td key={column.name}>{row.change === "removed" ? before : (after ?? before)}</td>;
      })}
    </tr>
  );
}
