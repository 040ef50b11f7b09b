"""Writes keys into Kubernetes Secrets through the API server, from inside a pod.

Only what the auth-setup Job needs: a JSON merge patch of one existing Secret's `data`. The
credentials are the pod's ServiceAccount token, read from a projected volume at each request
(the kubelet rotates it), checked against the cluster CA from the same volume. A merge patch
needs only the `patch` verb, which RBAC can limit to named Secrets (`create` it cannot), so
the Secrets are declared, empty, by the manifests. The client is a few lines of urllib: one
request kind does not justify the Kubernetes client library and its dependencies.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from silt.errors import FailedPrecondition, NotFound, PermissionDenied, Unavailable

# Where the kubelet mounts a ServiceAccount's token, CA and namespace; the auth-setup Job
# mounts its own projected volume with the same layout there.
DEFAULT_CREDENTIALS_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class KubeApi:
    base_url: str
    namespace: str
    token_file: Path
    context: ssl.SSLContext

    @classmethod
    def in_cluster(cls, credentials_dir: Path, environ: Mapping[str, str]) -> KubeApi:
        """The API server the kubelet names in every container's environment."""
        host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "")
        if not host or not port:
            raise FailedPrecondition("not in a Kubernetes pod: KUBERNETES_SERVICE_HOST and _PORT are unset")
        if ":" in host:  # IPv6
            host = f"[{host}]"
        try:
            context = ssl.create_default_context(cafile=str(credentials_dir / "ca.crt"))
            namespace = (credentials_dir / "namespace").read_text().strip()
        except OSError as exc:
            raise FailedPrecondition(
                f"no ServiceAccount credentials in {credentials_dir} (token, ca.crt, namespace): {exc.strerror}"
            ) from None
        return cls(f"https://{host}:{port}", namespace, credentials_dir / "token", context)

    def patch_secret_data(self, name: str, data: Mapping[str, str]) -> None:
        """Set these keys of Secret `name` (others stay); the Secret must exist."""
        body = {"data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}}
        try:
            token = self.token_file.read_text().strip()
        except OSError as exc:
            raise FailedPrecondition(
                f"cannot read the ServiceAccount token {self.token_file}: {exc.strerror}"
            ) from None
        request = urllib.request.Request(
            f"{self.base_url}/api/v1/namespaces/{quote(self.namespace, safe='')}/secrets/{quote(name, safe='')}",
            data=json.dumps(body).encode(),
            method="PATCH",
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/merge-patch+json",
                "Accept": "application/json",
            },
        )
        where = f"Secret {name} in namespace {self.namespace}"
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=_TIMEOUT_S) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise NotFound(f"{where} does not exist: apply deploy/k8s, which declares it, first") from None
            if exc.code in (401, 403):
                raise PermissionDenied(
                    f"the API server refused to patch {where} (HTTP {exc.code}): the pod's ServiceAccount needs"
                    " the verb patch on it"
                ) from None
            raise Unavailable(f"patching {where}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise Unavailable(f"patching {where}: cannot reach {self.base_url}: {reason}") from None
