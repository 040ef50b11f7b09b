import { describe, expect, it } from "vitest";
import { describeSchemaChange } from "../src/pages/refs/table_changes";

describe("describeSchemaChange", () => {
  it("says what happened to the field", () => {
    expect(describeSchemaChange({ change: "added", field_id: 4, name: "score", type: "double" })).toBe("added score (double)");
    expect(describeSchemaChange({ change: "removed", field_id: 2, name: "old", type: "string" })).toBe("removed old (string)");
    expect(describeSchemaChange({ change: "renamed", field_id: 2, name: "label", previous_name: "name", type: "string" })).toBe(
      "renamed name → label",
    );
    expect(describeSchemaChange({ change: "type_changed", field_id: 3, name: "n", type: "long", previous_type: "int" })).toBe(
      "n: int → long",
    );
  });
});
