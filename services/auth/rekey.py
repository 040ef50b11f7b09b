"""Moves every stored credential secret to a new ``auth.encrypt_secret_key``.

The upgrade path for secrets sealed under a key that auth now refuses (a passphrase), and a
key rotation. With auth stopped:

    SILT_AUTH_PREVIOUS_ENCRYPT_SECRET_KEY=<old key> SILT_AUTH_ENCRYPT_SECRET_KEY=<new key> \\
        python -m services.auth.rekey [--config FILE]

then start auth with the new key. Each secret is opened with the old key and sealed anew
under the new one; a secret that opens with the new key already is left alone, so a run that
stopped half way is simply run again. The keys come from the environment only: a command
line is visible to every user of the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from pydantic import SecretStr

from services.auth import keys
from services.auth.secrets import SecretBox
from silt.auth.v1 import model_pb2 as pb
from silt.config import load_config
from silt.errors import Aborted, ConfigError, FailedPrecondition, NotFound, PredicateFailed
from silt.kv import Store, open_store
from silt.tool_main import run_tool

PREVIOUS_KEY_ENV = "SILT_AUTH_PREVIOUS_ENCRYPT_SECRET_KEY"


@dataclass(frozen=True)
class RekeyResult:
    moved: int
    already: int


def rekey(store: Store, previous: SecretBox, new: SecretBox, partition: bytes = keys.PARTITION) -> RekeyResult:
    """Re-seal every credential secret under new; FailedPrecondition names a secret neither opens."""
    moved = already = 0
    for entry_key in [entry.key for entry in keys.scan_all(store, partition, keys.CREDENTIALS)]:
        try:
            current = store.get(partition, entry_key)
        except NotFound:
            continue  # deleted meanwhile
        credential = pb.Credential.FromString(current.value)
        access_key_id = credential.access_key_id
        try:
            new.open(access_key_id, credential.encrypted_secret)
            already += 1
            continue
        except FailedPrecondition:
            pass
        secret = previous.open(access_key_id, credential.encrypted_secret)
        credential.encrypted_secret = new.seal(access_key_id, secret)
        try:
            store.set_if(partition, entry_key, credential.SerializeToString(), current.predicate)
        except PredicateFailed:
            raise Aborted(f"access key {access_key_id} changed while re-encrypting: stop auth, run again") from None
        moved += 1
    return RekeyResult(moved, already)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Re-encrypt every credential secret under auth.encrypt_secret_key (run with auth stopped).",
        epilog=f"The old key is read from ${PREVIOUS_KEY_ENV}, the new one as auth reads it "
        "(SILT_AUTH_ENCRYPT_SECRET_KEY or the configuration file).",
    )
    parser.add_argument("--config", help="YAML configuration file")
    args = parser.parse_args(argv)

    def body() -> None:
        config = load_config(args.config)
        old_key = os.environ.get(PREVIOUS_KEY_ENV, "")
        if not old_key:
            raise ConfigError(f"{PREVIOUS_KEY_ENV} must hold the key the secrets are sealed under now")
        new_box = SecretBox(config.auth.encrypt_secret_key)
        with open_store(config.database) as store:
            result = rekey(store, SecretBox.previous(SecretStr(old_key)), new_box)
        print(f"re-encrypted {result.moved} credential secrets ({result.already} were under the new key already)")

    return run_tool("silt auth rekey", body)


if __name__ == "__main__":
    sys.exit(main())
