import { describe, expect, it } from "vitest";

import { plural } from "../src/pages/review/admin/id_picker";

describe("an id picker's placeholder noun", () => {
  it("puts a consonant's y into -ies, and adds s to the rest", () => {
    expect(plural("policy")).toBe("policies");
    expect(plural("user")).toBe("users");
    expect(plural("group")).toBe("groups");
    expect(plural("key")).toBe("keys");
  });
});
