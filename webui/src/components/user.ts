// The signed-in user, for any component below the app.
import { createContext } from "preact";
import { useContext, useEffect, useState } from "preact/hooks";
import { call, callJson } from "../api";
import type { CurrentUser } from "../session";

export const UserContext = createContext<CurrentUser | null>(null);

export function useUser(): CurrentUser {
  const user = useContext(UserContext);
  if (!user) throw new Error("useUser outside a signed-in page");
  return user;
}

// Whether the signed-in user administers users: lakeFS's stat returns physical addresses to
// every reader, so the UI shows them only to administrators. Asked once per user: the answer
// is whether listing users is allowed.
const adminAnswers = new Map<string, Promise<boolean>>();

export function useIsAdmin(): boolean {
  const user = useUser();
  const [admin, setAdmin] = useState(false);
  useEffect(() => {
    let asked = adminAnswers.get(user.id);
    if (!asked) {
      asked = call("/auth/users", { query: { amount: 1 }, quiet401: true }).then(
        () => true,
        () => false,
      );
      adminAnswers.set(user.id, asked);
    }
    let current = true;
    // Never rejects: a failed call is the answer false.
    void asked.then((answer) => current && setAdmin(answer));
    return () => {
      current = false;
    };
  }, [user.id]);
  return admin;
}

/** What the signed-in user may do that changes what the UI offers (GET /user/permissions). */
export interface Permissions {
  create_repository: boolean;
  administer: boolean;
}

// Asked once per user and page load; a failed call offers nothing it would have gated.
const permissionAnswers = new Map<string, Promise<Permissions>>();
const NONE: Permissions = { create_repository: false, administer: false };

/** The signed-in user's permissions, undefined until the server answered. */
export function usePermissions(): Permissions | undefined {
  const user = useUser();
  const [permissions, setPermissions] = useState<Permissions | undefined>(undefined);
  useEffect(() => {
    let asked = permissionAnswers.get(user.id);
    if (!asked) {
      asked = callJson<Permissions>("/user/permissions", { quiet401: true }).catch(() => NONE);
      permissionAnswers.set(user.id, asked);
    }
    let current = true;
    void asked.then((answer) => current && setPermissions(answer));
    return () => {
      current = false;
    };
  }, [user.id]);
  return permissions;
}
