// The signed-in user, for any component below the app.
import { createContext } from "preact";
import { useContext, useEffect, useState } from "preact/hooks";
import { call } from "../api";
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
