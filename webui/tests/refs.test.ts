import { afterEach, describe, expect, it, vi } from "vitest";
import { OLDER, lastChange } from "../src/pages/refs/last_change";
import { tableOfPointer } from "../src/pages/refs/compare";
import { mergeRefs } from "../src/pages/refs/merge";
import { commitHref, shortId } from "../src/pages/refs/model";
import {
  FIRST_RETRY_MS,
  type HistoryEvent,
  LAST_RETRY_MS,
  MAX_EVENTS,
  nextRetryPause,
  parseHistoryEvent,
  withEvent,
} from "../src/pages/refs/live_feed";
import { type PullRequest, pullDiffRange } from "../src/pages/review/pulls_api";

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("commits", () => {
  it("shortens ids to 12 characters and links a commit page", () => {
    expect(shortId("0123456789abcdef")).toBe("0123456789ab");
    expect(commitHref("r 1", "c/1")).toBe("/ui/repositories/r%201/commits/c%2F1");
  });
});

describe("mergeRefs", () => {
  function stubAnswer(status: number, body: unknown) {
    const fetch = vi.fn().mockResolvedValue(new Response(JSON.stringify(body), { status }));
    vi.stubGlobal("fetch", fetch);
    return fetch;
  }

  it("gives the merge commit and posts to source/merge/destination", async () => {
    const fetch = stubAnswer(200, { reference: "c9" });
    await expect(mergeRefs("r", "feature/x", "main", "", "")).resolves.toEqual({ kind: "merged", commitId: "c9" });
    expect(fetch.mock.calls[0][0]).toBe("/api/v1/repositories/r/refs/feature%2Fx/merge/main");
    // Empty strategy and message are left out, not sent as "".
    expect((fetch.mock.calls[0][1] as RequestInit).body).toBe("{}");
  });

  it("lists a 409's conflicts instead of failing", async () => {
    stubAnswer(409, {
      message: "conflict",
      conflicts: [{ path: "a", source: "changed", destination: "removed" }],
      conflicts_truncated: true,
    });
    await expect(mergeRefs("r", "s", "d", "dest-wins", "m")).resolves.toEqual({
      kind: "conflicts",
      message: "conflict",
      conflicts: [{ path: "a", source: "changed", destination: "removed" }],
      truncated: true,
      tables: [],
    });
  });

  it("keeps the Iceberg tables a 409 names, and finds a table by its pointer's path", async () => {
    const tables = [{ table: "db.t", reason: "schema changed on both sides" }];
    stubAnswer(409, {
      message: "conflict found: conflicting paths: db/t/_iceberg_table.json; table db.t: schema changed on both sides",
      conflicts: [{ path: "db/t/_iceberg_table.json", source: "changed", destination: "changed" }],
      tables,
    });
    const outcome = await mergeRefs("r", "s", "d", "", "");
    expect(outcome).toMatchObject({ kind: "conflicts", tables });
    expect(tableOfPointer("db/t/_iceberg_table.json", tables)).toEqual(tables[0]);
    expect(tableOfPointer("db/t/data/x.parquet", tables)).toBeUndefined();
  });

  it("fails on any other error status with the API's message", async () => {
    stubAnswer(403, { message: "not allowed to merge" });
    await expect(mergeRefs("r", "s", "d", "", "")).rejects.toMatchObject({ status: 403, message: "not allowed to merge" });
  });
});

describe("live feed", () => {
  const event = (id: string): HistoryEvent => ({
    id,
    timestamp_us: 1,
    type: "put",
    path: "p",
    user: "u",
    source: "s3",
    commit_id: "",
    message: "",
    size: 0,
  });

  it("reads an event, and nothing from data that is not one", () => {
    expect(parseHistoryEvent(JSON.stringify(event("e1")))?.id).toBe("e1");
    expect(parseHistoryEvent("not json")).toBeNull();
    expect(parseHistoryEvent("null")).toBeNull();
    expect(parseHistoryEvent('{"path": "no id"}')).toBeNull();
  });

  it("puts the newest event on top and keeps at most MAX_EVENTS", () => {
    let events: HistoryEvent[] = [];
    for (let i = 0; i < MAX_EVENTS + 5; i++) events = withEvent(events, event(`e${i}`));
    expect(events).toHaveLength(MAX_EVENTS);
    expect(events[0].id).toBe(`e${MAX_EVENTS + 4}`);
    expect(events[MAX_EVENTS - 1].id).toBe("e5");
  });

  it("doubles the pause between retries up to the last", () => {
    const pauses = [FIRST_RETRY_MS];
    while (pauses.length < 8) pauses.push(nextRetryPause(pauses[pauses.length - 1]));
    expect(pauses).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
    expect(Math.max(...pauses)).toBe(LAST_RETRY_MS);
  });
});

describe("pullDiffRange", () => {
  const pull = (fields: Partial<PullRequest>): PullRequest => ({
    id: "1",
    status: "open",
    title: "t",
    description: "",
    author: "a",
    source_branch: "feature",
    destination_branch: "main",
    creation_date: "",
    approvals: 0,
    required_approvals: 0,
    merge_blocked_reason: "",
    ...fields,
  });

  it("compares an open pull's source with its merge base on the destination", () => {
    expect(pullDiffRange(pull({}))).toEqual({ left: "main", right: "feature", type: "three_dot" });
  });

  it("shows a merged pull as its merge commit against the first parent", () => {
    expect(pullDiffRange(pull({ status: "merged", merged_commit_id: "m1" }))).toEqual({ left: "m1~1", right: "m1", type: "two_dot" });
  });

  it("falls back to the branches when a merged pull has no commit id", () => {
    expect(pullDiffRange(pull({ status: "merged", merged_commit_id: null })).type).toBe("three_dot");
  });
});

describe("lastChange", () => {
  const answer = (results: unknown[], hasMore: boolean) =>
    new Response(JSON.stringify({ pagination: { has_more: hasMore, next_offset: hasMore ? "c9" : "", results: results.length, max_per_page: 1 }, results }), { status: 200 });

  it("tells a change further back than its bounded lookup from no change at all", async () => {
    vi.stubGlobal("fetch", vi.fn().mockImplementation(() => Promise.resolve(answer([], true))));
    await expect(lastChange("r", "main", "old.csv")).resolves.toBe(OLDER);
    vi.stubGlobal("fetch", vi.fn().mockImplementation(() => Promise.resolve(answer([], false))));
    await expect(lastChange("r", "main", "new.csv")).resolves.toBeNull();
  });
});
