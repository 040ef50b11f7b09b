"""The part of a Kubernetes API server the auth-setup Job uses, for `make k8s-up`: HTTPS under a
throwaway CA, one bearer token for the Job's ServiceAccount, and PATCH (JSON merge patch of
`data`) of the Secrets its Role names with the verb patch. Anything else is refused as the real
server would refuse it (401, 403, 404, 415). The patched values are kept for the caller, which
turns them into podman secrets."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import secrets
import ssl
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

MAX_BODY = 1 << 20


def patchable_secrets(docs: list[dict[str, Any]], service_account: str) -> set[str]:
    """The Secrets a ServiceAccount may patch: resourceNames of the Roles bound to it."""
    roles = {
        binding["roleRef"]["name"]
        for binding in docs
        if binding["kind"] == "RoleBinding"
        and any(s.get("kind") == "ServiceAccount" and s.get("name") == service_account for s in binding["subjects"])
    }
    names: set[str] = set()
    for role in docs:
        if role["kind"] != "Role" or role["metadata"]["name"] not in roles:
            continue
        for rule in role.get("rules", []):
            if "secrets" in rule.get("resources", []) and "patch" in rule.get("verbs", []):
                names.update(rule.get("resourceNames", []))
    return names


def _self_signed(address: str, directory: Path) -> tuple[Path, Path]:
    """A CA certificate that is also the server's (for `address`), and its key; both PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "silt-kube-podman-api")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "ca.crt", directory / "api.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_file.chmod(0o600)
    return cert_file, key_file


class KubeApiStandIn:
    """Serves on (address, port); writes the pod's credentials folder (token, ca.crt, namespace)."""

    def __init__(self, address: str, namespace: str, allowed: set[str], credentials_dir: Path) -> None:
        self.namespace = namespace
        self.allowed = allowed
        self.patched: dict[str, dict[str, str]] = {}
        self.token = secrets.token_urlsafe(32)
        credentials_dir.mkdir(parents=True, exist_ok=True)
        cert_file, key_file = _self_signed(address, credentials_dir)
        (credentials_dir / "token").write_text(self.token)
        (credentials_dir / "namespace").write_text(namespace)
        for path in (credentials_dir / "token", credentials_dir / "namespace", cert_file):
            path.chmod(0o644)  # read by the pod's uid, which is not the caller's
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_file, key_file)
        key_file.unlink()
        # All interfaces: the network's bridge (address) appears only with its first container.
        # Only the bearer of the token gets anything.
        self._server = ThreadingHTTPServer(("0.0.0.0", 0), _handler(self))
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="kube-api", daemon=True)

    def __enter__(self) -> KubeApiStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def apply(self, name: str, patch: Mapping[str, Any]) -> None:
        data = self.patched.setdefault(name, {})
        for key, value in (patch.get("data") or {}).items():
            data[str(key)] = base64.b64decode(str(value)).decode()


def _handler(api: KubeApiStandIn) -> type[BaseHTTPRequestHandler]:
    prefix = f"/api/v1/namespaces/{api.namespace}/secrets/"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, reason: str) -> None:
            body = json.dumps({"kind": "Status", "code": status, "reason": reason}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PATCH(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._answer(413, "RequestEntityTooLarge")
                return
            body = self.rfile.read(length)
            name = self.path[len(prefix) :] if self.path.startswith(prefix) else ""
            if self.headers.get("Authorization") != f"Bearer {api.token}":
                self._answer(401, "Unauthorized")
            elif not name or "/" in name:
                self._answer(404, "NotFound")
            elif name not in api.allowed:
                self._answer(403, "Forbidden")
            elif self.headers.get("Content-Type") != "application/merge-patch+json":
                self._answer(415, "UnsupportedMediaType")
            else:
                try:
                    api.apply(name, json.loads(body))
                except (ValueError, AttributeError):
                    self._answer(400, "BadRequest")
                    return
                self._answer(200, "OK")

        def do_GET(self) -> None:
            self._answer(403, "Forbidden")  # the Job's Role grants patch only

    return Handler
