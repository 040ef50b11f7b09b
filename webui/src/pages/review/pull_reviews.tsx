// Reviews of a pull request: who approved or asked for changes, of which commit (a review of an
// older head is stale and no longer counts), and a form to submit one's own verdict.
import { formatIsoTime } from "../../components/format";
import { useState } from "preact/hooks";
import { ErrorNote, Loading } from "../../components/error_page";
import { useUser } from "../../components/user";
import { useAsync } from "../../components/use_async";
import { type PullRequest, pullsApi, type Verdict } from "./pulls_api";

const VERDICT_LABELS: Record<Verdict, string> = { approve: "approved", request_changes: "requested changes" };

export function ReviewsPanel(props: { repo: string; pull: PullRequest; version: number; onChange: () => void }) {
  const { repo, pull } = props;
  const reviews = useAsync((signal) => pullsApi.reviews(repo, pull.id, signal), [repo, pull.id, props.version]);
  const user = useUser();
  return (
    <section class="reviews" data-testid="reviews">
      <h3>Reviews</h3>
      <ErrorNote error={reviews.error} />
      {reviews.loading && !reviews.data && <Loading what="reviews" />}
      {reviews.data && reviews.data.results.length === 0 && <p class="empty">No reviews yet.</p>}
      <ul class="review-list">
        {(reviews.data?.results ?? []).map((review) => (
          <li key={review.author} class={`review verdict-${review.verdict}${review.current ? "" : " stale"}`} data-testid="review">
            <strong>{review.author}</strong> {VERDICT_LABELS[review.verdict]}{" "}
            <span class="when">{formatIsoTime(review.creation_date)}</span>
            {!review.current && <span class="badge stale"> stale: of commit {review.commit_id.slice(0, 12)}, no longer the source's head</span>}
            {review.body && <p class="review-body">{review.body}</p>}
          </li>
        ))}
      </ul>
      {pull.status === "open" && pull.author !== user.id && <ReviewForm {...props} />}
      {pull.status === "open" && pull.author === user.id && <p class="hint">Authors cannot review their own pull request.</p>}
    </section>
  );
}

function ReviewForm({ repo, pull, onChange }: { repo: string; pull: PullRequest; onChange: () => void }) {
  const [body, setBody] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (verdict: Verdict) => {
    setBusy(true);
    setError(undefined);
    try {
      await pullsApi.review(repo, pull.id, verdict, body);
      setBody("");
      onChange();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="review-form" onSubmit={(event) => event.preventDefault()} data-testid="review-form">
      <label>
        Review note (optional)
        <textarea name="review_body" rows={3} maxLength={4096} value={body} onInput={(e) => setBody(e.currentTarget.value)} />
      </label>
      <ErrorNote error={error} />
      <div class="actions">
        <button type="button" class="primary" disabled={busy} onClick={() => void submit("approve")} data-testid="approve">
          Approve
        </button>
        <button type="button" disabled={busy} onClick={() => void submit("request_changes")} data-testid="request-changes">
          Request changes
        </button>
      </div>
    </form>
  );
}
