// A small CSV parser for previews: RFC 4180 quoting ("" inside quotes), any line ending. The
// preview reads only the first bytes of an object, so a last line cut short is dropped.

export function parseCsv(text: string, truncated: boolean, delimiter = ","): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = "";
  let quoted = false;
  let i = 0;
  while (i < text.length) {
    const char = text[i];
    if (quoted) {
      if (char === '"') {
        if (text[i + 1] === '"') {
          cell += '"';
          i++;
        } else {
          quoted = false;
        }
      } else {
        cell += char;
      }
    } else if (char === '"' && cell === "") {
      quoted = true;
    } else if (char === delimiter) {
      row.push(cell);
      cell = "";
    } else if (char === "\n" || char === "\r") {
      if (char === "\r" && text[i + 1] === "\n") i++;
      row.push(cell);
      rows.push(row);
      row = [];
      cell = "";
    } else {
      cell += char;
    }
    i++;
  }
  if (!truncated && (cell !== "" || row.length > 0)) {
    row.push(cell);
    rows.push(row);
  }
  return rows;
}
