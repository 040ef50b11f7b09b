// The comment thread of a pull request, oldest first, a page at a time, with a form to add one.
// Comments are allowed whatever the pull request's status.
import { formatIsoTime } from "../../components/format";
import { useEffect, useState } from "preact/hooks";
import { ErrorNote, Loading } from "../../components/error_page";
import { type Comment, pullsApi } from "./pulls_api";

export function CommentThread({ repo, id }: { repo: string; id: string }) {
  const [comments, setComments] = useState<Comment[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>(undefined);

  const load = (after: string, signal: AbortSignal) => {
    setLoading(true);
    pullsApi.comments(repo, id, after, signal).then(
      (page) => {
        if (signal.aborted) return;
        setComments((previous) => (after ? [...previous, ...page.results] : page.results));
        setNext(page.pagination.has_more ? page.pagination.next_offset : null);
        setLoading(false);
      },
      (failure: unknown) => {
        if (signal.aborted) return;
        setError(failure);
        setLoading(false);
      },
    );
  };
  useEffect(() => {
    const controller = new AbortController();
    load("", controller.signal);
    return () => controller.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [repo, id]);

  return (
    <section class="comments" data-testid="comments">
      <ol class="comment-list">
        {comments.map((comment) => (
          <li key={comment.id} class="comment" data-testid="comment">
            <p class="comment-head">
              <strong data-testid="comment-author">{comment.author}</strong> <span class="when">{formatIsoTime(comment.creation_date)}</span>
            </p>
            <p class="comment-body" data-testid="comment-body">
              {comment.body}
            </p>
          </li>
        ))}
      </ol>
      {!loading && comments.length === 0 && <p class="empty">No comments yet.</p>}
      {loading && <Loading what="comments" />}
      <ErrorNote error={error} />
      {next !== null && !loading && (
        <button type="button" onClick={() => load(next, new AbortController().signal)} data-testid="more-comments">
          More comments…
        </button>
      )}
      {/* A new comment is the newest: shown now unless newer pages are still to load. */}
      <CommentForm repo={repo} id={id} onAdded={(comment) => setComments((previous) => (next === null ? [...previous, comment] : previous))} />
    </section>
  );
}

function CommentForm({ repo, id, onAdded }: { repo: string; id: string; onAdded: (comment: Comment) => void }) {
  const [body, setBody] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    if (!body.trim()) return;
    setBusy(true);
    setError(undefined);
    try {
      onAdded(await pullsApi.comment(repo, id, body));
      setBody("");
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="comment-form" onSubmit={(event) => void submit(event)} data-testid="comment-form">
      <label>
        Add a comment
        <textarea name="comment" rows={3} required value={body} onInput={(e) => setBody(e.currentTarget.value)} />
      </label>
      <ErrorNote error={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy || !body.trim()} data-testid="comment-submit">
          Comment
        </button>
      </div>
    </form>
  );
}
