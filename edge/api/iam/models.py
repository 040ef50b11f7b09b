"""Auth's IAM messages as the lakefs-sdk models the contract names."""

from __future__ import annotations

from lakefs_sdk.models import Credentials, CredentialsWithSecret, Group, User

from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import model_pb2 as pb


def user(record: pb.User) -> User:
    return User(id=record.id, creation_date=int(record.creation_date.seconds), friendly_name=None, email=None)


def group(record: pb.Group) -> Group:
    # lakeFS's group name is its id; Silt keeps a description beside it.
    return Group(
        id=record.id,
        name=record.id,
        description=record.description or None,
        creation_date=int(record.creation_date.seconds),
    )


def credentials(info: auth_api.CredentialInfo) -> Credentials:
    return Credentials(access_key_id=info.access_key_id, creation_date=int(info.creation_date.seconds))


def credentials_with_secret(reply: auth_api.CreateCredentialsResponse) -> CredentialsWithSecret:
    return CredentialsWithSecret(
        access_key_id=reply.credential.access_key_id,
        secret_access_key=reply.secret_access_key,
        creation_date=int(reply.credential.creation_date.seconds),
    )
