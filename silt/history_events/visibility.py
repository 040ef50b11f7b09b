"""Who sees whose reads in the history events: a read is no event another reader needs to see,
and who read which path tells what they are interested in. So a reader's feed (graveler's
ListEvents and WatchEvents, the REST API's live feed) holds its own reads only, and every
other kind of event; administrators see every read.

"Administrator" is what the web UI already means by it: the user may list users
(iam:ReadUser on `users/`). The services that record reads (auth:RecordEvents on the
repository, the gateway's and the REST API's own users) see them all too: the REST API asks
graveler as itself and narrows the feed to its caller here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from silt.errors import SiltError
from silt.graveler.v1 import events_pb2 as ev
from silt.iam_actions import READ_USER, RECORD_EVENTS, USERS
from silt.rpc.interceptor import current_principal

# (action, resource) -> whether the current caller holds it
May = Callable[[str, str], bool]


def sees_every_read(may: May, repository: str) -> bool:
    try:
        return may(READ_USER, USERS) or may(RECORD_EVENTS, repository)
    except SiltError:  # auth unreachable: show only what is surely theirs
        return False


def reads_viewer(may: May, repository: str) -> str | None:
    """Whose reads the current gRPC caller sees: None for everyone's, else its own user id.
    Served without the auth interceptor (embedded use, tests) there is one caller: None."""
    try:
        user = current_principal().user_id
    except SiltError:
        return None
    return None if sees_every_read(may, repository) else user


def shown(event: ev.HistoryEvent, viewer: str | None) -> bool:
    return viewer is None or event.type != ev.READ or event.user == viewer


def shown_to(events: Iterable[ev.HistoryEvent], viewer: str | None) -> Iterator[ev.HistoryEvent]:
    """The events `viewer` sees (None: all), in order; lazy, so a followed stream stays one."""
    return (event for event in events if shown(event, viewer))
