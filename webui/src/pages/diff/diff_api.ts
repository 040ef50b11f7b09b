// The object diff API's answer (docs/design/api.md): both sides' metadata, and by kind a table's
// schema change and rows, a text's hunks, or nothing more (images and binary objects).
import { api, seg } from "../../api";
import type { DiffType, RowMatch } from "./diff_links";

export interface Side {
  ref: string;
  exists: boolean;
  size_bytes?: number;
  checksum?: string;
  content_type?: string;
  mtime?: number;
  metadata?: Record<string, string>;
}

export interface Column {
  name: string;
  type: string;
}

export interface TableSample {
  rows: number;
  bytes_read: number;
  complete: boolean;
}

export interface DiffRowChange {
  change: "added" | "removed" | "changed";
  position: number;
  left?: (string | null)[];
  right?: (string | null)[];
  columns?: string[];
}

export interface TextLine {
  op: " " | "+" | "-";
  text: string;
  left: number | null;
  right: number | null;
}

export interface TextSample {
  lines: number;
  bytes_read: number;
  complete: boolean;
}

export interface ObjectDiffAnswer {
  path: string;
  kind: "csv" | "tsv" | "parquet" | "text" | "image" | "binary";
  identical: boolean;
  left: Side;
  right: Side;
  // Tables
  key?: string | null;
  /** How rows were paired: on `key`, on their content, or by position. */
  match?: "key" | "content" | "position";
  /** Whether `key` was found by the API (no key was asked for). */
  key_detected?: boolean;
  schema?: { left: Column[]; right: Column[]; added: Column[]; removed: Column[]; changed: { name: string; left: string; right: string }[] };
  counts?: { added: number; removed: number; changed?: number; unchanged?: number };
  rows?: DiffRowChange[];
  // Text
  hunks?: { left_start: number; right_start: number; lines: TextLine[] }[];
  truncated?: boolean;
  sample?: {
    left: (TableSample & TextSample) | null;
    right: (TableSample & TextSample) | null;
    limit_bytes: number;
    limit_rows?: number;
    limit_lines?: number;
  };
}

export function getObjectDiff(repo: string, left: string, right: string, path: string, type: DiffType, key: string, match: RowMatch, signal: AbortSignal): Promise<ObjectDiffAnswer> {
  const how = key ? { key } : { match };
  return api.get<ObjectDiffAnswer>(`/repositories/${seg(repo)}/refs/${seg(left)}/diff/${seg(right)}/object`, { path, type, ...how, limit: 200 }, signal);
}
