// Display formats shared by the pages.

export function formatBytes(size: number): string {
  if (size < 1024) return `${size} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = size / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

// One formatter for every call: Date.toLocaleString builds a new one each time, which made a
// 1,000-row listing spend most of its render formatting dates.
const DATE_TIME = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/** A Unix time in seconds as local date and time. */
export function formatTime(seconds: number | undefined | null): string {
  if (!seconds) return "";
  return DATE_TIME.format(new Date(seconds * 1000));
}

/** An RFC 3339 time (the actions API's) as local date and time; a time that does not parse as is. */
export function formatIsoTime(value: string | undefined | null): string {
  if (!value) return "";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : DATE_TIME.format(date);
}

/** The last segment of an object path or directory prefix ("a/b/" -> "b/"). */
export function baseName(path: string, prefix: string): string {
  return path.startsWith(prefix) ? path.slice(prefix.length) : path;
}
