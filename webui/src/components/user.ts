// The signed-in user, for any component below the app.
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { CurrentUser } from "../session";

export const UserContext = createContext<CurrentUser | null>(null);

export function useUser(): CurrentUser {
  const user = useContext(UserContext);
  if (!user) throw new Error("useUser outside a signed-in page");
  return user;
}
