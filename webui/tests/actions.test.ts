import { afterEach, describe, expect, it, vi } from "vitest";
import { formatIsoTime } from "../src/components/format";
import {
  actionsApi,
  formatCheckList,
  formatDuration,
  outcomeClass,
  outcomeOf,
  parseCheckList,
  runHref,
  runsHref,
} from "../src/pages/actions/model";
import { checkRows, checksInProgress, type PullCheck } from "../src/pages/review/pulls_api";

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("formatDuration", () => {
  const start = "2024-06-15T12:00:00Z";

  it("shows milliseconds under a second and seconds with a decimal under a minute", () => {
    expect(formatDuration(start, "2024-06-15T12:00:00.250Z")).toBe("250 ms");
    expect(formatDuration(start, start)).toBe("0 ms");
    expect(formatDuration(start, "2024-06-15T12:00:01.5Z")).toBe("1.5 s");
    expect(formatDuration(start, "2024-06-15T12:00:59.94Z")).toBe("59.9 s");
  });

  it("shows minutes and seconds, then hours and minutes", () => {
    expect(formatDuration(start, "2024-06-15T12:01:05Z")).toBe("1 min 5 s");
    expect(formatDuration(start, "2024-06-15T14:03:09Z")).toBe("2 h 3 min");
  });

  it("reads offsets, not only Z", () => {
    expect(formatDuration("2024-06-15T14:00:00+02:00", "2024-06-15T12:00:02Z")).toBe("2.0 s");
  });

  it("shows nothing without an end or with a time that does not parse", () => {
    expect(formatDuration(start, undefined)).toBe("");
    expect(formatDuration(start, null)).toBe("");
    expect(formatDuration(undefined, start)).toBe("");
    expect(formatDuration("yesterday", start)).toBe("");
  });

  it("never goes negative when clocks disagree", () => {
    expect(formatDuration("2024-06-15T12:00:01Z", start)).toBe("0 ms");
  });
});

describe("outcomes", () => {
  it("groups run, hook and check statuses by meaning", () => {
    expect(outcomeOf("completed")).toBe("ok");
    expect(outcomeOf("passed")).toBe("ok");
    expect(outcomeOf("failed")).toBe("failed");
    expect(outcomeOf("pending")).toBe("waiting");
    expect(outcomeOf("running")).toBe("waiting");
    expect(outcomeOf("skipped")).toBe("unknown");
    expect(outcomeOf("")).toBe("unknown");
  });

  it("gives the badge class", () => {
    expect(outcomeClass("failed")).toBe("outcome-failed");
    expect(outcomeClass("completed")).toBe("outcome-ok");
    expect(outcomeClass("<b>")).toBe("outcome-unknown");
  });
});

describe("parseCheckList", () => {
  it("splits on commas and trims", () => {
    expect(parseCheckList(" Check/reject ,Lint/schema")).toEqual(["Check/reject", "Lint/schema"]);
  });

  it("gives [] for an empty or blank list", () => {
    expect(parseCheckList("")).toEqual([]);
    expect(parseCheckList("  ,  , ")).toEqual([]);
  });

  it("drops empty names and repeats, keeping the first order", () => {
    expect(parseCheckList("a/b,, c/d ,a/b,")).toEqual(["a/b", "c/d"]);
  });

  it("keeps spaces inside a name", () => {
    expect(parseCheckList("My check/hook one")).toEqual(["My check/hook one"]);
  });

  it("round-trips with formatCheckList", () => {
    expect(formatCheckList(["a/b", "c/d"])).toBe("a/b, c/d");
    expect(formatCheckList(undefined)).toBe("");
    expect(formatCheckList(null)).toBe("");
    expect(parseCheckList(formatCheckList(["a/b", "c/d"]))).toEqual(["a/b", "c/d"]);
  });
});

describe("URLs", () => {
  it("links the runs list with its filters and a run's page, encoded", () => {
    expect(runsHref("r 1")).toBe("/ui/repositories/r%201/actions");
    expect(runsHref("r", { branch: "feature/x" })).toBe("/ui/repositories/r/actions?branch=feature%2Fx");
    expect(runsHref("r", { commit: "c1", branch: "" })).toBe("/ui/repositories/r/actions?commit=c1");
    expect(runHref("r", "run/1")).toBe("/ui/repositories/r/actions/run%2F1");
  });
});

describe("actionsApi", () => {
  it("lists runs with the branch and commit filters and the cursor", async () => {
    const page = { pagination: { has_more: false, next_offset: "", results: 0, max_per_page: 1000 }, results: [] };
    const fetch = vi.fn().mockResolvedValue(new Response(JSON.stringify(page), { status: 200 }));
    vi.stubGlobal("fetch", fetch);
    await actionsApi.runs("r", { branch: "main", commit: "" }, "run9", new AbortController().signal);
    expect(fetch.mock.calls[0][0]).toBe("/api/v1/repositories/r/actions/runs?branch=main&after=run9&amount=50");
  });

  it("reads a hook's output as text, not JSON", async () => {
    const fetch = vi.fn().mockResolvedValue(new Response('rejected by lua\n{"not": json', { status: 200 }));
    vi.stubGlobal("fetch", fetch);
    await expect(actionsApi.output("r", "run 1", "0000_0000")).resolves.toBe('rejected by lua\n{"not": json');
    expect(fetch.mock.calls[0][0]).toBe("/api/v1/repositories/r/actions/runs/run%201/hooks/0000_0000/output");
  });

  it("turns a refusal into the API's message", async () => {
    vi.stubGlobal("fetch", vi.fn().mockResolvedValue(new Response(JSON.stringify({ message: "run not found" }), { status: 404 })));
    await expect(actionsApi.run("r", "x")).rejects.toMatchObject({ status: 404, message: "run not found" });
  });
});

describe("checks of a pull request", () => {
  const check = (name: string, status: PullCheck["status"]): PullCheck => ({ name, status, commit_id: "c1", error: "" });

  it("marks required checks and adds the required ones no check reported", () => {
    const rows = checkRows([check("A/one", "passed"), check("B/two", "failed")], ["B/two", "C/three"]);
    expect(rows.map((row) => [row.name, row.required, row.check?.status ?? null])).toEqual([
      ["A/one", false, "passed"],
      ["B/two", true, "failed"],
      ["C/three", true, null],
    ]);
  });

  it("copes with a server that sends neither field", () => {
    expect(checkRows(undefined, undefined)).toEqual([]);
    expect(checkRows(null, ["X/y", "X/y"])).toEqual([{ name: "X/y", check: null, required: true }]);
  });

  it("keeps polling only while a check is pending or running", () => {
    expect(checksInProgress([check("a", "passed"), check("b", "pending")])).toBe(true);
    expect(checksInProgress([check("a", "running")])).toBe(true);
    expect(checksInProgress([check("a", "passed"), check("b", "failed")])).toBe(false);
    expect(checksInProgress(undefined)).toBe(false);
  });
});

describe("formatIsoTime", () => {
  it("formats an RFC 3339 time and leaves a bad one as is", () => {
    expect(formatIsoTime("2024-06-15T12:00:00Z")).toMatch(/2024/);
    expect(formatIsoTime("not a time")).toBe("not a time");
    expect(formatIsoTime(undefined)).toBe("");
  });
});
