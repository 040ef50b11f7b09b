// The REST API's IAM endpoints (lakeFS's /auth/...) as the administration pages use them.
import { api, seg } from "../../../api";

/** An item of a relation's listing (a group's members, a user's groups, the policies attached
 * to either): `kept_by_setup` when setup makes that binding again at every start, so the API
 * refuses to undo it (409) and the pages offer no Detach or Remove for it. */
export interface Bound {
  kept_by_setup?: boolean;
}

export interface User extends Bound {
  id: string;
  creation_date: number;
}

export interface Group extends Bound {
  id: string;
  name?: string | null;
  description?: string | null;
  creation_date: number;
  /** One of Silt's own (setup's): it cannot be deleted. */
  system?: boolean;
}

export interface Statement {
  effect: "allow" | "deny";
  resource: string;
  action: string[];
}

export interface Policy extends Bound {
  id: string;
  creation_date?: number | null;
  statement: Statement[];
  /** One of Silt's own (setup's): it can be neither edited nor deleted. */
  system?: boolean;
}

export interface Credentials {
  access_key_id: string;
  creation_date: number;
}

export interface CredentialsWithSecret extends Credentials {
  secret_access_key: string;
}

export const PAGE_SIZE = 100;

/** Silt's own services sign in as users named svc-<service> (services/auth/setup.py). */
export const SERVICE_PREFIX = "svc-";

export function isServiceUser(id: string): boolean {
  return id.startsWith(SERVICE_PREFIX);
}

const user = (id: string) => `/auth/users/${seg(id)}`;
const group = (id: string) => `/auth/groups/${seg(id)}`;
const policy = (id: string) => `/auth/policies/${seg(id)}`;

export const iamApi = {
  users: (after: string, signal: AbortSignal, prefix = "") => api.page<User>("/auth/users", { prefix }, after, PAGE_SIZE, signal),
  createUser: (id: string) => api.post<User>("/auth/users", { id }),
  getUser: (id: string, signal?: AbortSignal) => api.get<User>(user(id), undefined, signal),
  deleteUser: (id: string) => api.del(user(id)),
  /** Ends every web session of the user, in every browser (their access keys keep working). */
  revokeSessions: (id: string) => api.del(user(id) + "/sessions"),
  userGroups: (id: string, after: string, signal: AbortSignal) => api.page<Group>(user(id) + "/groups", {}, after, PAGE_SIZE, signal),
  userPolicies: (id: string, after: string, signal: AbortSignal) => api.page<Policy>(user(id) + "/policies", {}, after, PAGE_SIZE, signal),
  attachToUser: (id: string, policyId: string) => api.put<void>(`${user(id)}/policies/${seg(policyId)}`),
  detachFromUser: (id: string, policyId: string) => api.del(`${user(id)}/policies/${seg(policyId)}`),
  credentials: (id: string, after: string, signal: AbortSignal) =>
    api.page<Credentials>(user(id) + "/credentials", {}, after, PAGE_SIZE, signal),
  createCredentials: (id: string) => api.post<CredentialsWithSecret>(user(id) + "/credentials"),
  deleteCredentials: (id: string, key: string) => api.del(`${user(id)}/credentials/${seg(key)}`),

  groups: (after: string, signal: AbortSignal, prefix = "") => api.page<Group>("/auth/groups", { prefix }, after, PAGE_SIZE, signal),
  createGroup: (id: string, description: string) => api.post<Group>("/auth/groups", { id, description }),
  getGroup: (id: string, signal?: AbortSignal) => api.get<Group>(group(id), undefined, signal),
  deleteGroup: (id: string) => api.del(group(id)),
  members: (id: string, after: string, signal: AbortSignal) => api.page<User>(group(id) + "/members", {}, after, PAGE_SIZE, signal),
  addMember: (id: string, userId: string) => api.put<void>(`${group(id)}/members/${seg(userId)}`),
  removeMember: (id: string, userId: string) => api.del(`${group(id)}/members/${seg(userId)}`),
  groupPolicies: (id: string, after: string, signal: AbortSignal) => api.page<Policy>(group(id) + "/policies", {}, after, PAGE_SIZE, signal),
  attachToGroup: (id: string, policyId: string) => api.put<void>(`${group(id)}/policies/${seg(policyId)}`),
  detachFromGroup: (id: string, policyId: string) => api.del(`${group(id)}/policies/${seg(policyId)}`),

  policies: (after: string, signal: AbortSignal, prefix = "") => api.page<Policy>("/auth/policies", { prefix }, after, PAGE_SIZE, signal),
  getPolicy: (id: string, signal?: AbortSignal) => api.get<Policy>(policy(id), undefined, signal),
  createPolicy: (body: Policy) => api.post<Policy>("/auth/policies", body),
  updatePolicy: (body: Policy) => api.put<Policy>(policy(body.id), body),
  deletePolicy: (id: string) => api.del(policy(id)),
};
