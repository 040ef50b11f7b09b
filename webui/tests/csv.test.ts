import { describe, expect, it } from "vitest";
import { parseCsv } from "../src/pages/objects_csv";

describe("parseCsv", () => {
  it("splits rows on any line ending", () => {
    expect(parseCsv("a,b\nc,d\r\ne,f\rg,h", false)).toEqual([
      ["a", "b"],
      ["c", "d"],
      ["e", "f"],
      ["g", "h"],
    ]);
  });

  it("reads quoted cells with delimiters, line breaks and doubled quotes", () => {
    expect(parseCsv('"x,y","say ""hi""","two\nlines"\n', false)).toEqual([["x,y", 'say "hi"', "two\nlines"]]);
  });

  it("keeps empty cells, at the end of a row too", () => {
    expect(parseCsv("a,,c,\n", false)).toEqual([["a", "", "c", ""]]);
  });

  it("keeps a last line without a line ending unless the text was cut short", () => {
    expect(parseCsv("a,b\nc,d", false)).toEqual([
      ["a", "b"],
      ["c", "d"],
    ]);
    expect(parseCsv("a,b\nc,d", true)).toEqual([["a", "b"]]);
  });

  it("takes another delimiter (TSV)", () => {
    expect(parseCsv("a\tb,c\n", false, "\t")).toEqual([["a", "b,c"]]);
  });

  it("treats a quote inside an unquoted cell as text", () => {
    expect(parseCsv('ab"c,d\n', false)).toEqual([['ab"c', "d"]]);
  });

  it("gives no rows for empty text", () => {
    expect(parseCsv("", false)).toEqual([]);
  });
});
