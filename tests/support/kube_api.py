"""A stand-in for the Kubernetes API server, as much of it as Silt's pods use: HTTPS under a CA
of its own, ServiceAccount bearer tokens it issues, RBAC decided from the rendered Roles and
RoleBindings, and Secrets (GET, and PATCH with a JSON merge patch of data) held in a dict
shared with the test. Every request is recorded, with the answer it got."""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.k8s import NAMESPACE, of_kind, rbac_allows
from tests.support.tls import new_authority

_SECRET_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/"


@dataclass(frozen=True)
class Request:
    account: str | None
    verb: str
    path: str
    status: int


class KubeApiServer:
    """secrets: Secret name -> {key: value}, the live Secrets (those the documents declare are
    created from them); the pods' environments read it, the API writes it."""

    def __init__(self, docs: list[dict[str, Any]], secrets_: dict[str, dict[str, str]], workdir: Path) -> None:
        self.docs = docs
        self.secrets = secrets_
        for doc in of_kind(docs, "Secret"):
            data = {k: base64.b64decode(v).decode() for k, v in (doc.get("data") or {}).items()}
            data.update({k: str(v) for k, v in (doc.get("stringData") or {}).items()})
            self.secrets.setdefault(doc["metadata"]["name"], data)
        self.requests: list[Request] = []
        self._tokens: dict[str, str] = {}
        authority = new_authority(workdir / "kube-api-ca", "kube-api")
        issued = authority.issue("kube-apiserver")
        self.ca_pem = Path(authority.ca_file).read_text()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(issued.cert_file, issued.key_file)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.host, self.port = "127.0.0.1", self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="kube-api", daemon=True)

    def start(self) -> KubeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def token_for(self, service_account: str) -> str:
        """A bearer token of that ServiceAccount (as the kubelet projects into a pod)."""
        token = secrets.token_urlsafe(32)
        self._tokens[token] = service_account
        return token

    def account(self, authorization: str | None) -> str | None:
        scheme, _, token = (authorization or "").partition(" ")
        return self._tokens.get(token) if scheme == "Bearer" else None

    def allowed(self, account: str, verb: str, resource: str, name: str) -> bool:
        return rbac_allows(self.docs, account, verb, resource, name)


def _handler(api: KubeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, account: str | None, verb: str, status: int, body: dict[str, Any]) -> None:
            api.requests.append(Request(account, verb, self.path, status))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _secret(self, verb: str) -> tuple[str | None, str] | None:
            """(account, Secret name) when the request may go on; else answered here."""
            account = api.account(self.headers.get("Authorization"))
            if account is None:
                self._answer(None, verb, 401, {"kind": "Status", "reason": "Unauthorized"})
                return None
            if not self.path.startswith(_SECRET_PATH) or "/" in self.path[len(_SECRET_PATH) :]:
                self._answer(account, verb, 404, {"kind": "Status", "reason": "NotFound"})
                return None
            name = self.path[len(_SECRET_PATH) :]
            if not api.allowed(account, verb, "secrets", name):
                self._answer(account, verb, 403, {"kind": "Status", "reason": "Forbidden"})
                return None
            if name not in api.secrets:
                self._answer(account, verb, 404, {"kind": "Status", "reason": "NotFound"})
                return None
            return account, name

        def _body(self, name: str) -> dict[str, Any]:
            data = {k: base64.b64encode(v.encode()).decode() for k, v in api.secrets[name].items()}
            return {"kind": "Secret", "metadata": {"name": name, "namespace": NAMESPACE}, "data": data}

        def do_GET(self) -> None:
            found = self._secret("get")
            if found is not None:
                self._answer(found[0], "get", 200, self._body(found[1]))

        def do_PATCH(self) -> None:
            patch = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            found = self._secret("patch")
            if found is None:
                return
            account, name = found
            if self.headers.get("Content-Type") != "application/merge-patch+json":
                self._answer(account, "patch", 415, {"kind": "Status", "reason": "UnsupportedMediaType"})
                return
            for key, value in (patch.get("data") or {}).items():
                api.secrets[name][key] = base64.b64decode(value).decode()
            self._answer(account, "patch", 200, self._body(name))

    return Handler
