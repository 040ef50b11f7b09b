// The live feed of a branch: its writes, deletes, commits, merges and resets as they happen,
// newest on top; reads only when asked for (there are many).
import { useState } from "preact/hooks";
import { ErrorPage, Loading } from "../../components/error_page";
import { formatBytes } from "../../components/format";
import { repoHref } from "../../components/layout";
import { RefPicker } from "../../components/ref_picker";
import { Link, navigate } from "../../components/router";
import { useAsync } from "../../components/use_async";
import { type FeedState, type HistoryEvent, MAX_EVENTS, useLiveFeed } from "./live_feed";
import { commitHref, refOrDefault, shortId } from "./model";

const STATE_TEXT: Record<FeedState, string> = {
  connecting: "Connecting…",
  live: "Live: new events appear at the top.",
  reconnecting: "Connection lost; reconnecting…",
  unavailable: "The live feed is unavailable: the server refused the event stream.",
};

export function LivePage({ repo, query }: { repo: string; query: URLSearchParams }) {
  const branch = useAsync((signal) => refOrDefault(repo, query.get("ref"), signal), [repo, query.get("ref")]);
  if (branch.error) return <ErrorPage error={branch.error} />;
  if (!branch.data) return <Loading what="branch" />;
  return <Feed key={branch.data} repo={repo} branch={branch.data} />;
}

function Feed({ repo, branch }: { repo: string; branch: string }) {
  const { events, state, retryInMs } = useLiveFeed(repo, branch);
  const [showReads, setShowReads] = useState(false);
  const shown = showReads ? events : events.filter((event) => event.type !== "read");
  return (
    <div class="refs-page" data-testid="live-page">
      <div class="toolbar">
        <RefPicker repo={repo} current={branch} onSelect={(ref) => navigate(repoHref(repo, "live", { ref }))} />
        <label class="inline">
          <input type="checkbox" checked={showReads} onChange={(e) => setShowReads(e.currentTarget.checked)} /> Show reads
        </label>
      </div>
      <p class={`feed-state feed-${state}`} role="status" data-testid="feed-state">
        {STATE_TEXT[state]}
        {state === "unavailable" && ` Trying again in ${Math.round(retryInMs / 1000)} s.`}
      </p>
      <table data-testid="feed">
        <thead>
          <tr>
            <th>Time</th>
            <th>Event</th>
            <th>Path / commit</th>
            <th>User</th>
            <th>Via</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((event) => (
            <EventRow key={event.id} repo={repo} event={event} />
          ))}
        </tbody>
      </table>
      {shown.length === 0 && <p class="empty">No events since the page opened.</p>}
      {events.length === MAX_EVENTS && <p class="note">Showing the latest {MAX_EVENTS} events.</p>}
    </div>
  );
}

function EventRow({ repo, event }: { repo: string; event: HistoryEvent }) {
  return (
    <tr data-testid="feed-event" class={`event-${event.type}`}>
      <td>{new Date(event.timestamp_us / 1000).toLocaleTimeString()}</td>
      <td>{event.type.replace("_", " ")}</td>
      <td>
        {event.path && <code>{event.path}</code>}
        {event.path && event.size > 0 && ` (${formatBytes(event.size)})`}
        {event.commit_id && (
          <>
            {" "}
            <Link href={commitHref(repo, event.commit_id)}>
              <code>{shortId(event.commit_id)}</code>
            </Link>{" "}
            {event.message}
          </>
        )}
      </td>
      <td>{event.user}</td>
      <td>{event.source}</td>
    </tr>
  );
}
