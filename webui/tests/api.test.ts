// The API client against a stubbed fetch: what pages get back from answers and failures.
import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiError, allPages, apiUrl, call, callJson, messageOf, onUnauthenticated, seg } from "../src/api";
import { whoami } from "../src/session";

function answer(status: number, body?: unknown, statusText = ""): Response {
  const text = body === undefined ? null : typeof body === "string" ? body : JSON.stringify(body);
  return new Response(text, { status, statusText });
}

function stubFetch(...responses: Response[]) {
  const fetch = vi.fn<(input: string, init?: RequestInit) => Promise<Response>>();
  for (const response of responses) fetch.mockResolvedValueOnce(response);
  vi.stubGlobal("fetch", fetch);
  return fetch;
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("apiUrl and seg", () => {
  it("puts the path below /api/v1 and drops empty query values", () => {
    expect(apiUrl("/repositories", { prefix: "", after: null, amount: 50, user_metadata: false, x: undefined })).toBe(
      "/api/v1/repositories?amount=50&user_metadata=false",
    );
  });

  it("encodes a whole segment, slashes included", () => {
    expect(`/repositories/r/branches/${seg("feature/a b")}`).toBe("/repositories/r/branches/feature%2Fa%20b");
  });
});

describe("call", () => {
  it("sends JSON with its content type and the session cookie", async () => {
    const fetch = stubFetch(answer(201, { id: "r" }));
    await expect(callJson("/repositories", { method: "POST", json: { name: "r" } })).resolves.toEqual({ id: "r" });
    const [url, init] = fetch.mock.calls[0];
    expect(url).toBe("/api/v1/repositories");
    expect(init?.body).toBe('{"name":"r"}');
    expect(init?.credentials).toBe("same-origin");
    expect(init?.headers).toMatchObject({ "Content-Type": "application/json" });
  });

  it("gives undefined for 204 and for an empty body", async () => {
    stubFetch(answer(204), answer(200, ""));
    await expect(callJson("/a")).resolves.toBeUndefined();
    await expect(callJson("/b")).resolves.toBeUndefined();
  });

  it("fails with the API's own message", async () => {
    stubFetch(answer(409, { message: "branch exists" }, "Conflict"));
    const failure = await call("/x").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ApiError);
    expect(failure).toMatchObject({ status: 409, message: "branch exists" });
  });

  it("falls back to the status line when the body is not the API's JSON", async () => {
    stubFetch(answer(502, "<html>bad gateway</html>", "Bad Gateway"));
    await expect(call("/x")).rejects.toMatchObject({ status: 502, message: "502 Bad Gateway" });
  });

  it("says the server is unreachable when fetch itself fails", async () => {
    vi.stubGlobal("fetch", vi.fn().mockRejectedValue(new TypeError("network")));
    await expect(call("/x")).rejects.toMatchObject({ status: 0, message: "the server could not be reached" });
  });

  it("tells listeners about a 401, except on quiet calls", async () => {
    const listener = vi.fn();
    const stop = onUnauthenticated(listener);
    try {
      stubFetch(answer(401, { message: "expired" }), answer(401, { message: "expired" }));
      await expect(call("/x", { quiet401: true })).rejects.toBeInstanceOf(ApiError);
      expect(listener).not.toHaveBeenCalled();
      await expect(call("/x")).rejects.toBeInstanceOf(ApiError);
      expect(listener).toHaveBeenCalledTimes(1);
    } finally {
      stop();
    }
  });
});

describe("allPages", () => {
  it("follows next_offset until has_more is false", async () => {
    const fetch = stubFetch(
      answer(200, { pagination: { has_more: true, next_offset: "b" }, results: ["a", "b"] }),
      answer(200, { pagination: { has_more: false, next_offset: "" }, results: ["c"] }),
    );
    await expect(allPages<string>("/list", { prefix: "p" }, 100)).resolves.toEqual(["a", "b", "c"]);
    const second = new URL(fetch.mock.calls[1][0], "http://h");
    expect(second.searchParams.get("after")).toBe("b");
    expect(second.searchParams.get("prefix")).toBe("p");
  });

  it("asks for no more than the limit leaves", async () => {
    const fetch = stubFetch(answer(200, { pagination: { has_more: true, next_offset: "x" }, results: ["a", "b", "c"] }));
    await expect(allPages<string>("/list", {}, 3)).resolves.toEqual(["a", "b", "c"]);
    expect(fetch).toHaveBeenCalledTimes(1);
    expect(new URL(fetch.mock.calls[0][0], "http://h").searchParams.get("amount")).toBe("3");
  });
});

describe("session", () => {
  it("whoami reads the user, or null without a valid session", async () => {
    stubFetch(answer(200, { user: { id: "alice" } }), answer(401, { message: "no session" }));
    await expect(whoami()).resolves.toEqual({ id: "alice" });
    await expect(whoami()).resolves.toBeNull();
  });

  it("whoami passes any other failure on", async () => {
    stubFetch(answer(500, { message: "down" }));
    await expect(whoami()).rejects.toMatchObject({ status: 500 });
  });
});

describe("messageOf", () => {
  it("reads an error's message or stringifies anything else", () => {
    expect(messageOf(new ApiError(400, "bad name"))).toBe("bad name");
    expect(messageOf("plain")).toBe("plain");
  });
});
