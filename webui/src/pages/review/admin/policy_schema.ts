// A policy document checked in the page, for feedback while typing: lakeFS's shape
// ({"statement": [{"effect", "action": [...], "resource"}]}) and the API's bounds. The API
// decides what is valid (it knows the actions and translates lakeFS's); this only catches what
// can never pass, so that a save is not a round trip to learn of a missing comma.
import type { Statement } from "./iam_api";

// The API's bounds (edge/api/iam/policies.py).
export const MAX_STATEMENTS = 100;
export const MAX_ACTIONS = 50;
export const MAX_ACTION_LENGTH = 64;
export const MAX_RESOURCE_LENGTH = 1024;

const STATEMENT_KEYS = new Set(["effect", "action", "resource"]);

export type Checked = { ok: true; statements: Statement[] } | { ok: false; problems: string[] };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function statementProblems(n: number, value: unknown): string[] {
  const where = `statement ${n}`;
  if (!isObject(value)) return [`${where}: must be an object with effect, action and resource`];
  const problems: string[] = [];
  for (const key of Object.keys(value)) {
    if (!STATEMENT_KEYS.has(key)) problems.push(`${where}: unknown field "${key}"`);
  }
  if (value.effect !== "allow" && value.effect !== "deny") problems.push(`${where}: "effect" must be "allow" or "deny"`);
  const action = value.action;
  if (!Array.isArray(action) || action.length === 0) {
    problems.push(`${where}: "action" must be a non-empty list of actions`);
  } else if (action.length > MAX_ACTIONS) {
    problems.push(`${where}: at most ${MAX_ACTIONS} actions`);
  } else {
    action.forEach((item, i) => {
      if (typeof item !== "string" || item.trim() === "") problems.push(`${where}: action ${i + 1} must be a non-empty string`);
      else if (item.length > MAX_ACTION_LENGTH) problems.push(`${where}: action ${i + 1} is longer than ${MAX_ACTION_LENGTH} characters`);
    });
  }
  const resource = value.resource;
  if (typeof resource !== "string" || resource.trim() === "") problems.push(`${where}: "resource" must be a non-empty string`);
  else if (resource.length > MAX_RESOURCE_LENGTH) problems.push(`${where}: "resource" is longer than ${MAX_RESOURCE_LENGTH} characters`);
  return problems;
}

/** The statements of a policy document's text, or what is wrong with it (every problem found). */
export function checkPolicyDocument(text: string): Checked {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (failure) {
    return { ok: false, problems: [`not valid JSON: ${failure instanceof Error ? failure.message : String(failure)}`] };
  }
  if (!isObject(document) || !("statement" in document)) return { ok: false, problems: ['must be a JSON object with a "statement" list'] };
  const statements = document.statement;
  if (!Array.isArray(statements) || statements.length === 0) return { ok: false, problems: ['"statement" must be a non-empty list'] };
  if (statements.length > MAX_STATEMENTS) return { ok: false, problems: [`at most ${MAX_STATEMENTS} statements`] };
  const problems = statements.flatMap((statement, i) => statementProblems(i + 1, statement));
  for (const key of Object.keys(document)) {
    if (key !== "statement" && key !== "id") problems.push(`unknown field "${key}"`);
  }
  return problems.length ? { ok: false, problems } : { ok: true, statements: statements as Statement[] };
}
