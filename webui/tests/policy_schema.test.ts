import { describe, expect, it } from "vitest";
import { checkPolicyDocument } from "../src/pages/review/admin/policy_schema";

describe("checkPolicyDocument", () => {
  it("accepts lakeFS's shape", () => {
    const text = JSON.stringify({ statement: [{ effect: "allow", action: ["ReadRepo", "fs:ReadObject"], resource: "*" }] });
    const checked = checkPolicyDocument(text);
    expect(checked.ok).toBe(true);
    if (checked.ok) expect(checked.statements[0].action).toEqual(["ReadRepo", "fs:ReadObject"]);
  });

  it("says what is not JSON", () => {
    const checked = checkPolicyDocument("{not json");
    expect(checked.ok).toBe(false);
    if (!checked.ok) expect(checked.problems[0]).toMatch(/^not valid JSON/);
  });

  it("names every problem of every statement", () => {
    const text = JSON.stringify({
      statement: [
        { effect: "maybe", action: [], resource: "" },
        { effect: "deny", action: ["ReadRepo", ""], resource: "x", extra: 1 },
      ],
    });
    const checked = checkPolicyDocument(text);
    expect(checked.ok).toBe(false);
    if (!checked.ok) {
      expect(checked.problems).toEqual([
        'statement 1: "effect" must be "allow" or "deny"',
        'statement 1: "action" must be a non-empty list of actions',
        'statement 1: "resource" must be a non-empty string',
        'statement 2: unknown field "extra"',
        "statement 2: action 2 must be a non-empty string",
      ]);
    }
  });

  it("wants a non-empty statement list", () => {
    expect(checkPolicyDocument("[]").ok).toBe(false);
    expect(checkPolicyDocument('{"statement": []}').ok).toBe(false);
    expect(checkPolicyDocument('{"statement": [{}], "other": 1}').ok).toBe(false);
  });
});
