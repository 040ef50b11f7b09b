// One file's upload with progress: fetch() reports no upload progress, XMLHttpRequest does
// (its upload "progress" events). The same multipart POST as the upload form's, so the same
// route, limits and errors (lakeFS's JSON message, shown as it is).
import { ApiError, apiErrorOf, apiUrl, seg } from "../api";

// A stalled upload gives up after this long (the server's own read timeout is shorter).
export const UPLOAD_TIMEOUT_MS = 30 * 60 * 1000;

export function objectUploadUrl(repo: string, branch: string, path: string): string {
  return apiUrl(`/repositories/${seg(repo)}/branches/${seg(branch)}/objects`, { path });
}

function errorOf(xhr: XMLHttpRequest): ApiError {
  return apiErrorOf(xhr.status, xhr.statusText, xhr.responseText);
}

/** Uploads `file` as `path` on the branch; `onProgress(sent, total)` as bytes go out. */
export function uploadWithProgress(
  repo: string,
  branch: string,
  path: string,
  file: File,
  onProgress: (sent: number, total: number) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", objectUploadUrl(repo, branch, path));
    xhr.withCredentials = true;
    xhr.timeout = UPLOAD_TIMEOUT_MS;
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded, event.total);
    });
    xhr.addEventListener("load", () => (xhr.status >= 200 && xhr.status < 300 ? resolve() : reject(errorOf(xhr))));
    xhr.addEventListener("error", () => reject(new ApiError(0, "the server could not be reached")));
    xhr.addEventListener("timeout", () => reject(new ApiError(0, "the upload timed out")));
    xhr.addEventListener("abort", () => reject(new ApiError(0, "the upload was canceled")));
    const form = new FormData();
    form.append("content", file, file.name);
    xhr.send(form);
  });
}
