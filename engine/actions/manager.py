"""Actions: loads the action files an event matches, runs their hooks, records the run.

Where hooks run (docs/design/actions.md): inside graveler, around the operation, as lakeFS
does. A pre-event run happens in the calling thread before the operation changes anything, so a
refusal leaves the repository exactly as it was (staging included) and the operation fails with
HookAborted (412 at the REST API, with the failing hook's error and output). A post-event run,
and a pull request check, runs in the background (scheduler.FairScheduler) after the operation
succeeded: its failure is recorded in its run and changes nothing.

Bounds, so that one repository's hooks never hold up another's operations:
* a pre-event run has a deadline (`run_timeout`, and the call's own), each hook its own timeout
  within it; a hanging webhook or a looping script ends there;
* a repository runs at most `max_runs_per_repository` pre-event runs at once (each holds one of
  graveler's request threads); one more is refused at once with ResourceExhausted (429);
* background runs share a few workers fairly (at most one per repository at a time).

No action files at the source ref costs one listing of `_lakefs_actions/`; for an immutable ref
(a commit id: every post-event's source) the parsed actions are cached. A file is parsed once
per content (its address and ETag), whether it parsed or failed; its YAML is parsed, and every
Lua script runs, in a child process graveler can kill (hook_process.py). Action files are
bounded in bytes (`max_file_bytes` each, `max_total_bytes` together), and a pre-event run takes
its slot before it reads and parses them, so a burst of commits against a large file waits in
429s, not in graveler's CPU.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from google.protobuf.timestamp_pb2 import Timestamp

from engine.actions.files import (
    ACTIONS_PREFIX,
    MAX_FILES,
    Action,
    Hook,
    InvalidActionFile,
    action_from,
    check_unique_names,
    is_action_file,
)
from engine.actions.hook_process import HookProcesses, NotParsed
from engine.actions.lua.runtime import LuaLimits
from engine.actions.read_access import HookAuthority, ReadAccess
from engine.actions.reads import RepositoryReads, ScopedCalls
from engine.actions.runs import RunStore, new_run_id
from engine.actions.scheduler import FairScheduler
from engine.actions.webhook import EnvPolicy, InvalidHook, WebhookPolicy, parse_webhook, send_webhook
from engine.core.deadline import NO_DEADLINE, Deadline
from engine.core.hooks import EventUser, HookRecord, payload_bytes
from engine.core.refs import BranchRecord, RepoHandle
from silt.errors import HOOK_ABORTED, HookAborted, NotFound, PermissionDenied, ResourceExhausted, SiltError
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.context import background_context

_log = logging.getLogger(__name__)

MAX_HOOK_RUNS = 100  # hooks one event may run, over all its actions
MAX_ERROR_OUTPUT = 2048  # of a failed hook's output, quoted in the refusal
MAX_CACHED_REFS = 256
MAX_CACHED_FILES = 1024


@dataclass
class ActionsOptions:
    enabled: bool = True
    # A pre-event run ends by then; each hook also by its own timeout (webhook `timeout`).
    run_timeout_seconds: float = 60.0
    max_runs_per_repository: int = 4
    # All repositories together: well below graveler's request threads (32), so hooks can never
    # hold every one of them.
    max_runs: int = 16
    background_workers: int = 4
    background_queue_per_repository: int = 100
    webhook: WebhookPolicy = field(default_factory=WebhookPolicy)
    env: EnvPolicy = field(default_factory=EnvPolicy)
    lua: LuaLimits = field(default_factory=LuaLimits)
    # Bytes of one action file, and of all the files one event reads.
    max_file_bytes: int = 64 * 1024
    max_total_bytes: int = 256 * 1024
    # Hook processes kept started ahead of the hooks that take them.
    spare_processes: int = 1


@dataclass(frozen=True)
class RunOutcome:
    run: pb.ActionRun
    failure: str  # "" when every hook passed


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


def _excerpt(output: str) -> str:
    data = output.encode()
    if len(data) <= MAX_ERROR_OUTPUT:
        return output
    return "..." + data[-MAX_ERROR_OUTPUT:].decode(errors="ignore")


class Actions:
    def __init__(
        self,
        reads: RepositoryReads,
        runs: RunStore,
        create_tag: Callable[[RepoHandle, str, str, Deadline, EventUser | None], None],
        options: ActionsOptions | None = None,
    ) -> None:
        self.options = options or ActionsOptions()
        # What a hook's user may read (read_access.py), set by the service that serves behind
        # auth; None (embedded use, tests): nothing is checked per key, as nowhere else.
        self.authority: HookAuthority | None = None
        self.reads = reads
        self.runs = runs
        self._create_tag = create_tag
        self._lock = threading.Lock()
        self._in_flight: dict[bytes, int] = {}
        self._running = 0
        self._by_commit: OrderedDict[tuple[bytes, str], list[Action]] = OrderedDict()
        # Content identity -> (path, the parsed action or why it failed).
        self._by_file: OrderedDict[tuple[str, str], tuple[str, Action | InvalidActionFile]] = OrderedDict()
        self.processes = HookProcesses(self.options.spare_processes)
        self.parses = 0  # action files parsed (cache misses)
        self.background = FairScheduler(
            self.options.background_workers, 1, self.options.background_queue_per_repository
        )
        # Short bookkeeping (a push marking its pull requests' checks pending) never waits behind
        # hooks: its own worker, so a hanging check does not leave a stale status showing.
        self.bookkeeping = FairScheduler(1, 1, self.options.background_queue_per_repository)

    def close(self) -> None:
        self.bookkeeping.close()
        self.background.close()
        self.processes.close()

    # --- loading -------------------------------------------------------------------------

    def _parsed(self, repo: RepoHandle, path: str, entry: pb.Entry) -> Action:
        """The action in one file, parsed once per content: a failure is cached like a success."""
        key = (repo.namespace + "\x00" + entry.physical_address, entry.etag)
        with self._lock:
            hit = self._by_file.get(key)
        if hit is None or hit[0] != path:
            hit = (path, self._parse(repo, path, entry))
            with self._lock:
                self._by_file[key] = hit
                while len(self._by_file) > MAX_CACHED_FILES:
                    self._by_file.popitem(last=False)
        if isinstance(hit[1], InvalidActionFile):
            raise InvalidActionFile(str(hit[1]))
        return hit[1]

    def _parse(self, repo: RepoHandle, path: str, entry: pb.Entry) -> Action | InvalidActionFile:
        cap = self.options.max_file_bytes
        if entry.size > cap:
            return InvalidActionFile(
                f"action file {path!r}: {entry.size} bytes, more than the {cap} an action file may have"
            )
        try:
            data = self.reads.read(repo, entry, cap)
        except SiltError as exc:
            # Not cached: the store may answer next time.
            raise InvalidActionFile(f"action file {path!r}: cannot be read: {exc}") from None
        self.parses += 1
        try:
            return action_from(self.processes.load_yaml(data, path), path)
        except NotParsed:
            raise  # no process started: the next run tries again
        except InvalidActionFile as exc:
            return exc

    def load(
        self,
        repo: RepoHandle,
        source_ref: str,
        deadline: Deadline,
        immutable: bool = False,
        at: BranchRecord | None = None,
        before_parse: Callable[[], None] | None = None,
    ) -> list[Action]:
        """Every action at source_ref (a commit id when immutable; the branch as the record `at`
        shows it, when given); InvalidActionFile if one of them is broken. `before_parse` is
        called once there are action files to read, before the first is read."""
        key = (repo.partition, source_ref)
        if immutable:
            with self._lock:
                cached = self._by_commit.get(key)
            if cached is not None:
                return cached
        if at is not None:
            files = self.reads.files_at(repo, at, ACTIONS_PREFIX, MAX_FILES)
        else:
            files = self.reads.files_under(repo, source_ref, ACTIONS_PREFIX, MAX_FILES, deadline)
        if len(files) > MAX_FILES:
            raise InvalidActionFile(f"more than {MAX_FILES} action files under {ACTIONS_PREFIX!r}")
        files = [(path, entry) for path, entry in files if is_action_file(path)]
        total = sum(entry.size for _, entry in files)
        if total > self.options.max_total_bytes:
            raise InvalidActionFile(
                f"action files under {ACTIONS_PREFIX!r} hold {total} bytes, more than the"
                f" {self.options.max_total_bytes} they may hold together"
            )
        if files and before_parse is not None:
            before_parse()
        actions = [self._parsed(repo, path, entry) for path, entry in files]
        check_unique_names(actions)
        if immutable:
            with self._lock:
                self._by_commit[key] = actions
                while len(self._by_commit) > MAX_CACHED_REFS:
                    self._by_commit.popitem(last=False)
        return actions

    def matching(
        self,
        repo: RepoHandle,
        record: HookRecord,
        deadline: Deadline,
        at: BranchRecord | None = None,
        before_parse: Callable[[], None] | None = None,
    ) -> list[Action]:
        if not self.options.enabled:
            return []
        loaded = self.load(repo, record.actions_at, deadline, record.immutable, at, before_parse)
        actions = [a for a in loaded if a.matches(record.event_type, record.branch_id)]
        if sum(len(a.hooks) for a in actions) > MAX_HOOK_RUNS:
            raise InvalidActionFile(f"event {record.event_type!r} matches more than {MAX_HOOK_RUNS} hooks")
        return actions

    # --- running -------------------------------------------------------------------------

    def _script(self, repo: RepoHandle, record: HookRecord, hook: Hook, deadline: Deadline, access: ReadAccess) -> str:
        script = hook.properties.get("script")
        path = hook.properties.get("script_path") or hook.properties.get("script_file")
        if isinstance(script, str) and script and not path:
            return script
        if isinstance(path, str) and path and not script:
            # Where the action file was read: a check's script is the destination's, like its
            # action file, or the pull request's author could rewrite what it must pass. Read as
            # the hook's user, as lakeFS loads it: a script they may not read does not run.
            try:
                access.check_key(path)
            except PermissionDenied as exc:
                raise InvalidHook(f"could not load script_path {path!r}: {exc}") from None
            entry = self.reads.entries.stat(repo, record.actions_at, path, deadline)
            return self.reads.read(repo, entry, 256 * 1024).decode()
        raise InvalidHook("a lua hook needs exactly one of 'script' and 'script_path'")

    def _run_hook(
        self,
        repo: RepoHandle,
        record: HookRecord,
        action: Action,
        hook: Hook,
        run_id: str,
        ends_at: float,
        deadline: Deadline,
    ) -> tuple[bool, str, str]:
        """(passed, output, error) of one hook, never raising for what the hook did."""
        payload = record.payload(action.name, hook.id)
        try:
            if hook.type == "webhook":
                spec = parse_webhook(hook.properties, self.options.env.for_repository(repo.name))
                sent = send_webhook(spec, payload_bytes(payload), self.options.webhook, ends_at)
                return sent.ok, sent.output, sent.error
            access = ReadAccess(self.authority, record.user, repo.name)
            script = self._script(repo, record, hook, deadline, access)
            args = hook.properties.get("args") or {}
            if not isinstance(args, dict):
                raise InvalidHook("'args' of a lua hook must be a mapping")
            limits = self.options.lua
            left = max(0.001, ends_at - time.monotonic())
            if left < limits.timeout_seconds:
                limits = LuaLimits(
                    max_memory_bytes=limits.max_memory_bytes,
                    max_instructions=limits.max_instructions,
                    timeout_seconds=left,
                    max_output_bytes=limits.max_output_bytes,
                )
            remaining = deadline.remaining()
            hook_end = ends_at if remaining is None else min(ends_at, time.monotonic() + remaining)
            hook_deadline = Deadline(hook_end, time.monotonic, deadline.is_active)
            calls = ScopedCalls(
                self.reads,
                repo,
                hook_deadline,
                lambda tag, ref: self._create_tag(repo, tag, ref, hook_deadline, record.user),
                access,
            )
            lua_action = {**payload, "run_id": run_id, "storage_namespace": repo.namespace}
            ran = self.processes.run_lua(script, lua_action, args, calls, limits, f"{action.file}:{hook.id}")
            return ran.ok, ran.output, ran.error
        except (InvalidHook, SiltError, UnicodeDecodeError) as exc:
            return False, "", str(exc)

    def run(
        self,
        repo: RepoHandle,
        record: HookRecord,
        actions: list[Action],
        run_id: str,
        ends_at: float,
        deadline: Deadline,
    ) -> RunOutcome:
        """Run every hook of actions for record, in file order, and store the run."""
        run = pb.ActionRun(
            run_id=run_id,
            event_type=record.event_type,
            branch=record.branch_id,
            commit_id=record.commit_id,
            source_ref=record.source_ref,
            start_time=_now(),
            tag_id=record.tag_id,
            pull_request_id=record.pull_request_id,
            pre_run_id=record.pre_run_id,
        )
        failure = ""
        for action_index, action in enumerate(actions):
            failed = False
            for hook_index, hook in enumerate(action.hooks):
                hook_run = run.hooks.add(
                    hook_run_id=f"{action_index:04d}_{hook_index:04d}", action=action.name, hook_id=hook.id
                )
                wanted = {
                    "": not failed,
                    "success()": not failed,
                    "failure()": failed,
                    "always()": True,
                    "true": True,
                    "false": False,
                }[hook.condition]
                if not wanted:
                    hook_run.skipped = True
                    continue
                hook_run.start_time.CopyFrom(_now())
                if time.monotonic() >= ends_at:
                    passed, output, error = False, "", "not run: the run's deadline passed"
                else:
                    passed, output, error = self._run_hook(repo, record, action, hook, run_id, ends_at, deadline)
                hook_run.end_time.CopyFrom(_now())
                hook_run.output = output if not error else f"{output}\nError: {error}\n"
                hook_run.error = error[:1024]
                if not passed:
                    hook_run.failed = True
                    failed = True
                    if not failure:
                        failure = (
                            f"hook run id '{run_id}_{hook_run.hook_run_id}' failed on action {action.name!r}"
                            f" hook {hook.id!r}: {error}"
                        )
                        if output:
                            failure += f"\n{_excerpt(output)}"
        run.end_time.CopyFrom(_now())
        run.failed = bool(failure)
        try:
            self.runs.save(repo, run)
        except SiltError:
            _log.exception("could not store action run %s of repository %r", run_id, repo.name)
            if not failure:
                raise
        return RunOutcome(run, failure)

    def pre(
        self, repo: RepoHandle, record: HookRecord, deadline: Deadline = NO_DEADLINE, at: BranchRecord | None = None
    ) -> str:
        """Run the pre-event hooks of record; the run id ("" if none matched). HookAborted if
        one failed, InvalidActionFile if an action file is broken: the operation must stop."""
        held = False

        def take_slot() -> None:
            nonlocal held
            if not held:
                self._take_slot(repo)
                held = True

        try:
            try:
                # The slot is taken once there are action files, before they are read and parsed.
                actions = self.matching(repo, record, deadline, at, take_slot)
            except NotFound as exc:
                if exc.what == "ref" and record.branch_id and record.source_ref == record.branch_id:
                    # The operation's own answer for a branch that is not there, not a ref's.
                    raise NotFound(
                        f"branch {record.branch_id!r} not found in repository {repo.name!r}", what="branch"
                    ) from None
                raise
            except InvalidActionFile as exc:
                run_id = self._record_broken(repo, record, str(exc))
                raise HookAborted(f"{record.event_type} {HOOK_ABORTED} '{run_id}': {exc}") from None
            if not actions:
                return ""
            take_slot()  # actions from the cache of an immutable ref
            ends_at = time.monotonic() + self.options.run_timeout_seconds
            remaining = deadline.remaining()
            if remaining is not None:
                ends_at = min(ends_at, time.monotonic() + remaining)
            run_id = new_run_id()
            outcome = self.run(repo, record, actions, run_id, ends_at, deadline)
        finally:
            if held:
                self._give_slot(repo)
        if outcome.failure:
            raise HookAborted(f"{record.event_type} {HOOK_ABORTED} '{run_id}': {outcome.failure}")
        return run_id

    def _take_slot(self, repo: RepoHandle) -> None:
        """One of the repository's pre-event run slots, and one of graveler's; ResourceExhausted
        (429) at once when none is free."""
        with self._lock:
            if self._in_flight.get(repo.partition, 0) >= self.options.max_runs_per_repository:
                raise ResourceExhausted(
                    f"repository {repo.name!r} already runs {self.options.max_runs_per_repository} pre-event hook"
                    " runs; retry later"
                )
            if self._running >= self.options.max_runs:
                raise ResourceExhausted(
                    f"graveler already runs {self.options.max_runs} pre-event hook runs; retry later"
                )
            self._in_flight[repo.partition] = self._in_flight.get(repo.partition, 0) + 1
            self._running += 1

    def _give_slot(self, repo: RepoHandle) -> None:
        with self._lock:
            self._running -= 1
            left = self._in_flight[repo.partition] - 1
            if left:
                self._in_flight[repo.partition] = left
            else:
                del self._in_flight[repo.partition]

    def name_commit(self, repo: RepoHandle, run_id: str, commit_id: str) -> None:
        """Record the commit a pre-event run let through. Best effort: the operation already
        succeeded, and failing its caller now would report a commit that exists as an error."""
        try:
            self.runs.set_commit(repo, run_id, commit_id, Deadline.after(5.0))
        except SiltError as exc:
            _log.warning("could not name commit %s in action run %s of %r: %s", commit_id, run_id, repo.name, exc)

    def post(self, repo: RepoHandle, record: HookRecord) -> None:
        """Run the post-event hooks of record in the background; failures are only recorded."""
        if not self.options.enabled:
            return

        def job() -> None:
            with background_context("actions", repo.name):
                try:
                    actions = self.matching(repo, record, NO_DEADLINE)
                except InvalidActionFile as exc:
                    self._record_broken(repo, record, str(exc))
                    return
                if actions:
                    ends_at = time.monotonic() + self.options.run_timeout_seconds
                    self.run(repo, record, actions, new_run_id(), ends_at, NO_DEADLINE)

        if not self.background.submit(repo.name, job):
            _log.warning(
                "dropped %s hooks of repository %r: its background queue is full", record.event_type, repo.name
            )

    def _record_broken(self, repo: RepoHandle, record: HookRecord, error: str) -> str:
        """A failed run for an event whose action files could not be loaded; its id."""
        run = pb.ActionRun(
            run_id=new_run_id(),
            event_type=record.event_type,
            branch=record.branch_id,
            commit_id=record.commit_id,
            source_ref=record.source_ref,
            start_time=_now(),
            end_time=_now(),
            failed=True,
            pre_run_id=record.pre_run_id,
        )
        run.hooks.add(
            hook_run_id="0000_0000",
            action="(action files)",
            hook_id="load",
            start_time=run.start_time,
            end_time=run.end_time,
            failed=True,
            error=error[:1024],
            output=error,
        )
        try:
            self.runs.save(repo, run)
        except SiltError:
            _log.exception("could not store the failed run of repository %r", repo.name)
        return run.run_id
