// Edits string key/value pairs: commit metadata, object user metadata. Rows with an empty key
// are dropped from the value the parent gets.
import { useState } from "preact/hooks";

export type Metadata = Record<string, string>;

export interface Row {
  key: string;
  value: string;
}

export function toMetadata(rows: Row[]): Metadata {
  const metadata: Metadata = {};
  for (const row of rows) if (row.key.trim()) metadata[row.key.trim()] = row.value;
  return metadata;
}

export function MetadataEditor({ onChange, label }: { onChange: (metadata: Metadata) => void; label?: string }) {
  const [rows, setRows] = useState<Row[]>([]);
  const update = (next: Row[]) => {
    setRows(next);
    onChange(toMetadata(next));
  };
  const edit = (index: number, field: keyof Row, value: string) =>
    update(rows.map((row, i) => (i === index ? { ...row, [field]: value } : row)));
  return (
    <fieldset class="metadata-editor" data-testid="metadata-editor">
      <legend>{label ?? "Metadata"}</legend>
      {rows.map((row, index) => (
        <div class="metadata-row" key={index}>
          <input
            placeholder="key"
            aria-label="metadata key"
            value={row.key}
            onInput={(event) => edit(index, "key", event.currentTarget.value)}
          />
          <input
            placeholder="value"
            aria-label="metadata value"
            value={row.value}
            onInput={(event) => edit(index, "value", event.currentTarget.value)}
          />
          <button type="button" onClick={() => update(rows.filter((_, i) => i !== index))}>
            Remove
          </button>
        </div>
      ))}
      <button type="button" onClick={() => update([...rows, { key: "", value: "" }])}>
        Add metadata
      </button>
    </fieldset>
  );
}
