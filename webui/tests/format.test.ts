import { describe, expect, it } from "vitest";
import { errorTitle } from "../src/components/error_page";
import { baseName, formatBytes, formatTime } from "../src/components/format";
import { toMetadata } from "../src/components/metadata_editor";
import { ApiError } from "../src/api";

describe("formatBytes", () => {
  it("shows sizes under 1 KiB in bytes", () => {
    expect(formatBytes(0)).toBe("0 B");
    expect(formatBytes(1023)).toBe("1023 B");
  });

  it("keeps one decimal below 10 units and none above", () => {
    expect(formatBytes(1024)).toBe("1.0 KiB");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(10 * 1024)).toBe("10 KiB");
    expect(formatBytes(5 * 1024 ** 3)).toBe("5.0 GiB");
  });

  it("stops at TiB however large the size", () => {
    expect(formatBytes(2048 * 1024 ** 4)).toBe("2048 TiB");
  });
});

describe("formatTime", () => {
  it("shows nothing for a missing or zero time", () => {
    expect(formatTime(undefined)).toBe("");
    expect(formatTime(null)).toBe("");
    expect(formatTime(0)).toBe("");
  });

  it("formats seconds, not milliseconds", () => {
    // 2024-06-15 12:00 UTC is mid-June in every time zone; read as milliseconds it would be 1970.
    expect(formatTime(1_718_452_800)).toMatch(/2024/);
  });
});

describe("baseName", () => {
  it("strips the listing's prefix and keeps a directory's slash", () => {
    expect(baseName("a/b/", "a/")).toBe("b/");
    expect(baseName("a/b/c.csv", "a/b/")).toBe("c.csv");
  });

  it("leaves a path outside the prefix whole", () => {
    expect(baseName("x/y", "a/")).toBe("x/y");
  });
});

describe("toMetadata", () => {
  it("drops rows without a key, trims keys and keeps values as typed", () => {
    const rows = [
      { key: " owner ", value: " data team " },
      { key: "  ", value: "ignored" },
      { key: "", value: "" },
    ];
    expect(toMetadata(rows)).toEqual({ owner: " data team " });
  });

  it("lets a later row win over an earlier one with the same key", () => {
    expect(toMetadata([{ key: "k", value: "1" }, { key: "k ", value: "2" }])).toEqual({ k: "2" });
  });
});

describe("errorTitle", () => {
  it("names the API's statuses people meet", () => {
    expect(errorTitle(new ApiError(403, "no"))).toBe("Not allowed");
    expect(errorTitle(new ApiError(404, "no"))).toBe("Not found");
    expect(errorTitle(new ApiError(401, "no"))).toBe("Signed out");
    expect(errorTitle(new ApiError(0, "no"))).toBe("Server unreachable");
  });

  it("has a generic title for anything else", () => {
    expect(errorTitle(new ApiError(500, "boom"))).toBe("Something went wrong");
    expect(errorTitle(new ApiError(400, "bad action"))).toBe("Not accepted");
    expect(errorTitle(new Error("403"))).toBe("Something went wrong");
  });
});
