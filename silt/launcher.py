"""Run the whole Silt stack locally: auth, graveler and (when present) gateway and compactor,
each as its own process talking gRPC over loopback, with all state under one data directory.

    with Stack("/tmp/silt") as stack:
        stack.admin            # the admin's Credentials
        stack.endpoints        # {"auth": "127.0.0.1:8101", "graveler": ..., "gateway": "http://..."}

The data directory holds everything, so a second start reuses it:

    config.yaml        the services' configuration (written on first run; edit freely)
    secret.key         auth.encrypt_secret_key (0600)
    services.json      the service users' access keys from auth setup (0600)
    credentials.json   the admin's access key and the endpoints, read by the `silt` CLI (0600)
    metadata.db        the `local` KV store (SQLite)
    data/              the local-disk object store
    logs/<service>.log each service's output

Auth setup runs once, on the first start; its secrets are shown only then, so they are
saved to the files above before anything else happens.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from pydantic import SecretStr

from silt.config import Config, dialable_address, dialable_host, load_config
from silt.errors import ConfigError, SiltError
from silt.free_ports import free_port
from silt.lifeline import PARENT_PID_ENV
from silt.listeners import owns_listener
from silt.rpc.signing import Credentials

log = logging.getLogger(__name__)

DATA_DIR_ENV = "SILT_DATA_DIR"
DEFAULT_DATA_DIR = "~/.silt"
CONFIG_FILE = "config.yaml"
SECRET_KEY_FILE = "secret.key"
SERVICE_KEYS_FILE = "services.json"
CREDENTIALS_FILE = "credentials.json"

READY_TIMEOUT_SECONDS = 60.0
STOP_GRACE_SECONDS = 10.0
MONITOR_INTERVAL_SECONDS = 0.2
MAX_RESTART_DELAY_SECONDS = 30.0
# `silt run` (make run) is someone at a terminal: a crash loop is shown at once, and a long
# wait would only look like a hang.
RUN_MAX_RESTART_DELAY_SECONDS = 5.0
FIRST_RESTART_DELAY_SECONDS = 1.0
# A service that stayed up this long is healthy again: its next crash restarts it at once.
STABLE_AFTER_SECONDS = 10.0


def restart_delay(
    delay: float, uptime: float, cap: float, stable_after: float = STABLE_AFTER_SECONDS
) -> tuple[float, float, str]:
    """After a crash: (seconds to wait now, the delay for a following quick crash, why).

    delay: the current backoff; uptime: how long the crashed run lasted. Only a service that
    keeps crashing soon after starting backs off; one run of stable_after seconds resets it.
    """
    if uptime >= stable_after:
        return 0.0, FIRST_RESTART_DELAY_SECONDS, f"it had run {uptime:.0f}s, so at once"
    wait = min(delay, cap)
    return (
        wait,
        min(delay * 2, cap),
        f"it crashed {uptime:.1f}s after starting; waiting longer after each quick crash, up to {cap:g}s",
    )


# In start order: everything else needs auth; the gateway and compactor call graveler.
ALL_SERVICES = ("auth", "graveler", "compactor", "gateway")
# The module each service runs as (`python -m`): the gateway's port is the edge process, which
# composes the S3 gateway, the REST API and the web UI; graveler runs as its package, for its
# spawned commit workers' sake (services/graveler/__main__.py).
ENTRY_POINTS = {name: f"services.{name}.server" for name in ALL_SERVICES} | {
    "graveler": "services.graveler",
    "gateway": "edge.server",
}


class StackError(SiltError):
    """The stack could not be prepared or a service did not come up."""


# Variables the launcher sets for each service; the caller's must not leak into them.
_LAUNCHER_OWNED = ("SILT_CREDENTIALS_", "SILT_API_CREDENTIALS_", "SILT_CONFIG")


def default_data_dir() -> Path:
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR).expanduser()


def available_services() -> list[str]:
    """The services whose entry point exists in this installation (gateway and compactor are newer)."""
    return [name for name in ALL_SERVICES if importlib.util.find_spec(ENTRY_POINTS[name]) is not None]


def _write_private(path: Path, text: str) -> None:
    """Create or replace path readable by the owner only; never briefly world-readable."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((dialable_host(host), port), timeout=0.5):
            return True
    except OSError:
        return False


def initial_config(data_dir: Path) -> dict[str, Any]:
    """The configuration a fresh data directory starts with: everything local, loopback only."""
    return {
        "logging": {"level": "INFO"},
        "database": {"type": "local", "local": {"path": str(data_dir / "metadata.db")}},
        "blockstore": {"type": "local", "local": {"path": str(data_dir / "data")}},
        "gateways": {
            "s3": {
                "listen_address": "127.0.0.1:8000",
                "domain_name": "s3.local",
                "region": "us-east-1",
                # `aws s3 mb s3://name` creates a repository stored in the local object store.
                "storage_namespace_template": "local://{repo}",
            }
        },
        "auth": {"listen_address": "127.0.0.1:8101", "endpoint": "127.0.0.1:8101"},
        "graveler": {"listen_address": "127.0.0.1:8102"},
        "compactor": {"listen_address": "127.0.0.1:8103"},
    }


@dataclass
class _Service:
    name: str
    env: dict[str, str]
    host: str
    port: int
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restarts: int = 0
    next_start: float = 0.0
    delay: float = FIRST_RESTART_DELAY_SECONDS
    log_file: Any = field(default=None, repr=False)


class Stack:
    """Prepares a data directory, starts the services, keeps them running, stops them.

    ports: service name -> port, overriding config.yaml (0 picks a free port).
    services: which to run (default: every service present in this installation).
    on_event: receives one line per notable event (a crash, a restart); default: logging.
    They are kept in `events` too.
    defer_admin: the first start creates no admin (auth setup --defer-admin): it is created once
    through the REST API's POST /api/v1/setup_lakefs, and `admin` stays None.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        ports: Mapping[str, int] | None = None,
        services: list[str] | None = None,
        restart: bool = True,
        on_event: Callable[[str], None] | None = None,
        log_level: str | None = None,
        max_restart_delay: float = MAX_RESTART_DELAY_SECONDS,
        stable_after: float = STABLE_AFTER_SECONDS,
        defer_admin: bool = False,
    ) -> None:
        """stable_after: how long a run must last to count as healthy (resetting the backoff)."""
        self.data_dir = Path(data_dir).expanduser().resolve() if data_dir is not None else default_data_dir()
        self.requested_ports = dict(ports or {})
        self.service_names = services if services is not None else available_services()
        self.restart = restart
        self.max_restart_delay = max_restart_delay
        self.stable_after = stable_after
        self._on_event = on_event or (lambda line: log.warning("%s", line))
        self.events: list[str] = []  # every event reported, oldest first (tests inspect it)
        self.log_level = log_level
        self.first_run = False
        self.defer_admin = defer_admin
        self.admin: Credentials | None = None
        self.admin_user_id = "admin"
        self.config: Config | None = None
        self._services: dict[str, _Service] = {}
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None

    def on_event(self, line: str) -> None:
        self.events.append(line)
        self._on_event(line)

    # --- preparing the data directory ---------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.data_dir / CONFIG_FILE

    @property
    def credentials_path(self) -> Path:
        return self.data_dir / CREDENTIALS_FILE

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    def _encrypt_key(self) -> str:
        path = self.data_dir / SECRET_KEY_FILE
        if not path.exists():
            _write_private(path, secrets.token_urlsafe(32) + "\n")
        return path.read_text().strip()

    def _load_config(self) -> Config:
        if not self.config_path.exists():
            self.config_path.write_text(yaml.safe_dump(initial_config(self.data_dir), sort_keys=False))
        # The launcher owns these; a stray SILT_CONFIG or credentials in the caller's
        # environment must not leak into the services.
        env = {k: v for k, v in os.environ.items() if not k.startswith(_LAUNCHER_OWNED)}
        return load_config(self.config_path, env=env)

    def _base_env(self, encrypt_key: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_LAUNCHER_OWNED)}
        # Through the environment rather than --config, which every service reads the same way.
        env["SILT_CONFIG"] = str(self.config_path)
        env["SILT_AUTH_ENCRYPT_SECRET_KEY"] = encrypt_key
        if self.log_level:
            env["SILT_LOGGING_LEVEL"] = self.log_level
        # The services are imported from this installation, wherever the caller's cwd is.
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _addresses(self, config: Config) -> dict[str, str]:
        configured = {
            "auth": config.auth.listen_address,
            "graveler": config.graveler.listen_address,
            "compactor": config.compactor.listen_address,
            "gateway": config.gateways.s3.listen_address,
        }
        out = {}
        for name, address in configured.items():
            host, port = _split(address)
            if name in self.requested_ports:
                port = self.requested_ports[name] or free_port(dialable_host(host))
            out[name] = f"{host}:{port}"
        return out

    def _run_setup(self, env: dict[str, str]) -> None:
        keys_path = self.data_dir / SERVICE_KEYS_FILE
        done = subprocess.run(
            [sys.executable, "-m", "services.auth.setup", "--json", *(["--defer-admin"] if self.defer_admin else [])],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise StackError(f"auth setup failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        if done.stdout.strip():
            keys = json.loads(done.stdout)
            self.first_run = True
            _write_private(keys_path, json.dumps(keys["services"], indent=2) + "\n")
            admin = keys["admin"]
            if admin is not None:
                self.admin_user_id = admin["user_id"]
                self.admin = Credentials(admin["access_key_id"], SecretStr(admin["secret_access_key"]))
            return
        if self.defer_admin and keys_path.exists() and not self.credentials_path.exists():
            return  # the admin is (or was) created through the REST API, which alone showed its key
        if not keys_path.exists() or not self.credentials_path.exists():
            raise StackError(
                f"auth in {self.data_dir} was set up, but its keys were not saved there "
                f"({SERVICE_KEYS_FILE}, {CREDENTIALS_FILE}); start over with an empty data directory"
            )
        saved = json.loads(self.credentials_path.read_text())
        self.admin_user_id = saved.get("user_id", "admin")
        self.admin = Credentials(saved["access_key_id"], SecretStr(saved["secret_access_key"]))

    def _save_client_credentials(self) -> None:
        assert self.admin is not None
        saved = {
            "user_id": self.admin_user_id,
            "access_key_id": self.admin.access_key_id,
            "secret_access_key": self.admin.secret_access_key.get_secret_value(),
            **self.endpoints,
            "region": self.config.gateways.s3.region if self.config else "us-east-1",
        }
        _write_private(self.credentials_path, json.dumps(saved, indent=2) + "\n")

    def prepare(self) -> None:
        """Create or reuse the data directory, run auth setup once, and work out each service's env."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.data_dir, 0o700)
        self.logs_dir.mkdir(exist_ok=True)
        encrypt_key = self._encrypt_key()
        self.config = self._load_config()
        if self.config.database.type == "mem":
            raise ConfigError("database.type mem cannot be shared by separate processes; use local or cassandra")
        env = self._base_env(encrypt_key)
        addresses = self._addresses(self.config)
        env["SILT_AUTH_LISTEN_ADDRESS"] = addresses["auth"]
        env["SILT_AUTH_ENDPOINT"] = dialable_address(addresses["auth"])
        env["SILT_GRAVELER_LISTEN_ADDRESS"] = addresses["graveler"]
        env["SILT_GRAVELER_ENDPOINT"] = dialable_address(addresses["graveler"])
        env["SILT_COMPACTOR_LISTEN_ADDRESS"] = addresses["compactor"]
        env["SILT_COMPACTOR_ENDPOINT"] = dialable_address(addresses["compactor"])
        env["SILT_GATEWAYS_S3_LISTEN_ADDRESS"] = addresses["gateway"]
        self._run_setup(env)
        service_keys = json.loads((self.data_dir / SERVICE_KEYS_FILE).read_text())
        for name in self.service_names:
            service_env = dict(env)
            key = service_keys.get(name)
            if key is not None:
                service_env["SILT_CREDENTIALS_ACCESS_KEY_ID"] = key["access_key_id"]
                service_env["SILT_CREDENTIALS_SECRET_ACCESS_KEY"] = key["secret_access_key"]
            api_key = service_keys.get("api")
            if name == "gateway" and api_key is not None:
                # The REST API on the gateway's port signs as its own user, svc-api.
                service_env["SILT_API_CREDENTIALS_ACCESS_KEY_ID"] = api_key["access_key_id"]
                service_env["SILT_API_CREDENTIALS_SECRET_ACCESS_KEY"] = api_key["secret_access_key"]
            host, port = _split(addresses[name])
            self._services[name] = _Service(name, service_env, host, port)
        if self.admin is not None:
            self._save_client_credentials()

    def service_env(self, name: str) -> dict[str, str]:
        """The environment a service of this stack runs with (its config file, addresses and
        keys): another process of that service's kind started with it joins the stack."""
        return dict(self._services[name].env)

    # --- what clients need ------------------------------------------------------------

    @property
    def endpoints(self) -> dict[str, str]:
        out = {}
        scheme = "https" if self.config is not None and self.config.gateways.s3.tls.enabled else "http"
        for name, svc in self._services.items():
            address = f"{dialable_host(svc.host)}:{svc.port}"
            out[name] = f"{scheme}://{address}" if name == "gateway" else address
        return out

    def env_for_clients(self) -> dict[str, str]:
        """Environment for the AWS CLI, boto3 and the `silt` CLI, signed in as the admin."""
        assert self.admin is not None, "start the stack first"
        env = {
            "SILT_ACCESS_KEY_ID": self.admin.access_key_id,
            "SILT_SECRET_ACCESS_KEY": self.admin.secret_access_key.get_secret_value(),
            "SILT_CLIENT_CREDENTIALS_FILE": str(self.credentials_path),
            "AWS_ACCESS_KEY_ID": self.admin.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.admin.secret_access_key.get_secret_value(),
            "AWS_DEFAULT_REGION": self.config.gateways.s3.region if self.config else "us-east-1",
        }
        if "gateway" in self._services:
            env["AWS_ENDPOINT_URL"] = self.endpoints["gateway"]
            env["AWS_ENDPOINT_URL_S3"] = self.endpoints["gateway"]
            if self.config is not None and self.config.gateways.s3.tls.ca_file:
                env["AWS_CA_BUNDLE"] = self.config.gateways.s3.tls.ca_file
        return env

    # --- processes ----------------------------------------------------------------------

    def _spawn(self, svc: _Service) -> None:
        if svc.log_file is None:
            svc.log_file = open(self.logs_dir / f"{svc.name}.log", "ab")  # noqa: SIM115 (kept open for the child)
        svc.log_file.write(f"\n--- starting {svc.name} at {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n".encode())
        svc.log_file.flush()
        svc.proc = subprocess.Popen(
            [sys.executable, "-m", ENTRY_POINTS[svc.name]],
            # The service watches this process and stops when it dies, even by kill -9.
            env={**svc.env, PARENT_PID_ENV: str(os.getpid())},
            stdin=subprocess.DEVNULL,
            stdout=svc.log_file,
            stderr=subprocess.STDOUT,
            # Own process group: Ctrl-C in the terminal reaches the launcher only, which then
            # stops the services in order instead of all of them dying at once.
            start_new_session=True,
        )
        svc.started_at = time.monotonic()

    def _ready(self, svc: _Service) -> bool:
        if svc.proc is None or svc.proc.poll() is not None or not _reachable(svc.host, svc.port):
            return False
        # Reachable is not enough: another process may have been given the port after it was
        # chosen, before the service bound it. The service (or its child) must hold the listener.
        return owns_listener(svc.proc.pid, svc.port) is not False

    def wait_ready(self, service: str, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        """Block until the service's current process accepts connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                svc = self._services[service]
                if self._ready(svc):
                    return
                if svc.proc is not None and svc.proc.poll() is not None and not self._monitoring():
                    raise StackError(
                        f"{service} exited with code {svc.proc.returncode}: {self._last_log_line(service)} "
                        f"(log: {self._log_path(service)})"
                    )
            time.sleep(0.05)
        raise StackError(f"{service} did not become ready in {timeout:.0f}s (log: {self._log_path(service)})")

    def _last_log_line(self, service: str) -> str:
        """The service's last words, usually the one-line reason it stopped."""
        try:
            lines = self._log_path(service).read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"

    def _monitoring(self) -> bool:
        return self.restart and self._monitor is not None and self._monitor.is_alive()

    def _log_path(self, service: str) -> Path:
        return self.logs_dir / f"{service}.log"

    def _port_in_use(self, svc: _Service) -> bool:
        return _reachable(svc.host, svc.port)

    def start(self) -> Stack:
        if not self._services:
            self.prepare()
        for svc in self._services.values():
            if self._port_in_use(svc):
                self.stop()
                raise StackError(
                    f"{svc.name}: port {svc.port} is in use (another Silt running?); "
                    f"choose other ports in {self.config_path}"
                )
        try:
            for svc in self._services.values():
                self._spawn(svc)
                self.wait_ready(svc.name)
        except BaseException:
            self.stop()
            raise
        self._stopping.clear()
        if self.restart:
            self._monitor = threading.Thread(target=self._watch, name="silt-stack-monitor", daemon=True)
            self._monitor.start()
        return self

    def _watch(self) -> None:
        while not self._stopping.wait(MONITOR_INTERVAL_SECONDS):
            with self._lock:
                for svc in self._services.values():
                    self._check(svc)

    def _check(self, svc: _Service) -> None:
        if svc.proc is None or self._stopping.is_set():
            return
        code = svc.proc.poll()
        now = time.monotonic()
        if code is None:
            if now - svc.started_at > self.stable_after:
                svc.delay = FIRST_RESTART_DELAY_SECONDS
            return
        if svc.next_start == 0.0:
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            delay, svc.delay, why = restart_delay(
                svc.delay, now - svc.started_at, self.max_restart_delay, self.stable_after
            )
            self.on_event(
                f"{svc.name} stopped ({how}): {self._last_log_line(svc.name)}; restarting in {delay:g}s: {why}"
                f" (log: {self._log_path(svc.name)})"
            )
            svc.next_start = now + delay
            return
        if now >= svc.next_start:
            svc.next_start = 0.0
            svc.restarts += 1
            self._spawn(svc)
            self.on_event(f"{svc.name} restarted (pid {svc.proc.pid})")

    def restarts(self, service: str) -> int:
        return self._services[service].restarts

    def pid(self, service: str) -> int | None:
        proc = self._services[service].proc
        return proc.pid if proc is not None else None

    def kill(self, service: str, sig: int = signal.SIGKILL) -> None:
        """Send sig to the service and wait for it to exit; the monitor then restarts it."""
        with self._lock:
            proc = self._services[service].proc
        if proc is None:
            return
        proc.send_signal(sig)
        proc.wait(STOP_GRACE_SECONDS)

    def stop(self) -> None:
        """SIGTERM every service (last started first), SIGKILL what outlives the grace period."""
        self._stopping.set()
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(5)
        with self._lock:
            for svc in reversed(list(self._services.values())):
                if svc.proc is not None and svc.proc.poll() is None:
                    svc.proc.terminate()
            for svc in reversed(list(self._services.values())):
                if svc.proc is None:
                    continue
                try:
                    svc.proc.wait(STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    self.on_event(f"{svc.name} did not stop in {STOP_GRACE_SECONDS:.0f}s; killing it")
                    svc.proc.kill()
                    svc.proc.wait()
                if svc.log_file is not None:
                    svc.log_file.close()
                    svc.log_file = None

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
