// The live feed's connection: an EventSource on the branch's server-sent history events,
// reconnected after failures with a growing pause, and the state the page tells the user.
import { useEffect, useState } from "preact/hooks";
import { apiUrl, seg } from "../../api";
import { repoPath } from "./model";

/** One history event as the API streams it (`event: history`, the data is this JSON). */
export interface HistoryEvent {
  id: string;
  timestamp_us: number;
  type: string;
  path: string;
  user: string;
  source: string;
  commit_id: string;
  message: string;
  size: number;
}

export type FeedState = "connecting" | "live" | "reconnecting" | "unavailable";

/** The most events the page keeps; older ones drop off the bottom. */
export const MAX_EVENTS = 500;
// The feed opens with this much of the recent past (the server keeps far more), so a page
// opened a moment after a write still shows it; browser and server clocks may differ this much.
const RECENT_PAST_US = 15 * 60 * 1_000_000;
export const FIRST_RETRY_MS = 1_000;
export const LAST_RETRY_MS = 30_000;

/** The pause before the next attempt after one that waited `pause`: doubled, at most LAST_RETRY_MS. */
export function nextRetryPause(pause: number): number {
  return Math.min(pause * 2, LAST_RETRY_MS);
}

/** A `history` message's data as an event, or null when it is not one (not JSON, no id). */
export function parseHistoryEvent(data: string): HistoryEvent | null {
  let event: HistoryEvent;
  try {
    event = JSON.parse(data) as HistoryEvent;
  } catch {
    return null; // not an event of the contract: nothing to show
  }
  return event && typeof event === "object" && event.id ? event : null;
}

/** The list the page shows with `event` on top, the oldest beyond MAX_EVENTS dropped. */
export function withEvent(events: HistoryEvent[], event: HistoryEvent): HistoryEvent[] {
  return [event, ...events].slice(0, MAX_EVENTS);
}

export function useLiveFeed(repo: string, branch: string): { events: HistoryEvent[]; state: FeedState; retryInMs: number } {
  const [events, setEvents] = useState<HistoryEvent[]>([]);
  const [state, setState] = useState<FeedState>("connecting");
  const [retryInMs, setRetryInMs] = useState(0);

  useEffect(() => {
    const path = `${repoPath(repo)}/branches/${seg(branch)}/events`;
    const seen = new Set<string>();
    // Where a new connection starts: the browser resumes its own reconnects with Last-Event-ID;
    // a connection this page opens again starts at the newest event it has (repeats are dropped).
    let since = Date.now() * 1000 - RECENT_PAST_US;
    let source: EventSource | null = null;
    let timer: number | undefined;
    let pause = FIRST_RETRY_MS;
    let stopped = false;

    const receive = (message: MessageEvent<string>) => {
      const event = parseHistoryEvent(message.data);
      // After a reconnect the server may repeat events the page already has.
      if (!event || seen.has(event.id)) return;
      seen.add(event.id);
      since = Math.max(since, event.timestamp_us);
      setEvents((previous) => withEvent(previous, event));
    };

    const connect = () => {
      setState((previous) => (previous === "unavailable" ? "reconnecting" : previous));
      source = new EventSource(apiUrl(path, { since }));
      source.addEventListener("open", () => {
        pause = FIRST_RETRY_MS;
        setState("live");
      });
      source.addEventListener("history", receive as EventListener);
      source.addEventListener("error", () => {
        if (stopped || !source) return;
        if (source.readyState === EventSource.CONNECTING) {
          // The browser reconnects by itself after a dropped stream.
          setState("reconnecting");
          return;
        }
        // Refused (an error status, not an event stream): the browser gives up; try again later.
        source.close();
        setState("unavailable");
        setRetryInMs(pause);
        timer = window.setTimeout(connect, pause);
        pause = nextRetryPause(pause);
      });
    };

    setEvents([]);
    setState("connecting");
    connect();
    return () => {
      stopped = true;
      source?.close();
      window.clearTimeout(timer);
    };
  }, [repo, branch]);

  return { events, state, retryInMs };
}
