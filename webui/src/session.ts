// The login session: POST /auth/login sets the HttpOnly session cookie (the page never sees
// the token), GET /user says who the cookie belongs to, POST /auth/logout drops it, and
// DELETE /auth/users/{id}/sessions ends every session of the user (every browser's).
import { ApiError, api, callJson, seg } from "./api";

export interface CurrentUser {
  id: string;
  creation_date?: number;
  friendly_name?: string | null;
  email?: string | null;
}

/** The signed-in user, or null when there is no valid session. */
export async function whoami(): Promise<CurrentUser | null> {
  try {
    const answer = await callJson<{ user: CurrentUser }>("/user", { quiet401: true });
    return answer.user;
  } catch (error) {
    if (error instanceof ApiError && error.unauthenticated) return null;
    throw error;
  }
}

export async function login(accessKeyId: string, secretAccessKey: string): Promise<CurrentUser> {
  await callJson("/auth/login", {
    method: "POST",
    json: { access_key_id: accessKeyId, secret_access_key: secretAccessKey },
    quiet401: true,
  });
  const user = await whoami();
  if (!user) throw new ApiError(401, "the session cookie was not accepted");
  return user;
}

export async function logout(): Promise<void> {
  await api.post("/auth/logout");
}

/** Ends every web session of the user, this one included (the answer drops this cookie too). */
export async function logoutEverywhere(userId: string): Promise<void> {
  await api.del(`/auth/users/${seg(userId)}/sessions`);
}
