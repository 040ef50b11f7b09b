// Upload files into a directory of a branch: one multipart form POST per file to the API's
// upload endpoint (the part named `content`), one after another.
import { useState } from "preact/hooks";
import { call, seg } from "../api";
import { ErrorNote } from "../components/error_page";

export function UploadForm(props: { repo: string; branch: string; prefix: string; onUploaded: () => void }) {
  const [files, setFiles] = useState<File[]>([]);
  const [prefix, setPrefix] = useState(props.prefix);
  const [done, setDone] = useState<number | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setDone(0);
    try {
      for (const [index, file] of files.entries()) {
        const form = new FormData();
        form.append("content", file, file.name);
        await call(`/repositories/${seg(props.repo)}/branches/${seg(props.branch)}/objects`, {
          method: "POST",
          query: { path: prefix + file.name },
          body: form,
        });
        setDone(index + 1);
      }
      props.onUploaded();
    } catch (failure) {
      setError(failure);
    }
  };
  const busy = done !== null && done < files.length && !error;
  return (
    <form class="card upload" onSubmit={(event) => void submit(event)} data-testid="upload-form">
      <label>
        Files
        <input type="file" multiple name="files" onChange={(event) => setFiles(Array.from(event.currentTarget.files ?? []))} />
      </label>
      <label>
        Into directory (prefix) on branch {props.branch}
        <input name="prefix" value={prefix} onInput={(event) => setPrefix(event.currentTarget.value)} />
      </label>
      <ErrorNote error={error} />
      {done !== null && (
        <p class="note" data-testid="upload-progress">
          {done} of {files.length} uploaded
        </p>
      )}
      <button type="submit" class="primary" disabled={files.length === 0 || busy}>
        Upload
      </button>
    </form>
  );
}
