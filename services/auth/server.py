"""gRPC wiring of auth: request messages in, IamModel calls, response messages out.

Permissions are checked before any of these handlers runs (services/auth/permissions.py,
enforced by silt.rpc.interceptor.AuthInterceptor); handlers only do the work.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import grpc
from grpc_health.v1.health import HealthServicer

from services.auth import signatures
from services.auth.acting import describe_caller
from services.auth.authority import LocalAuthority, local_interceptor
from services.auth.grants import Grants
from services.auth.model import IamModel
from services.auth.policies import check_resource
from services.auth.secrets import SecretBox
from services.auth.sessions import SessionTokens, secrets_match
from services.auth.setup import ADMINS, SILT_POLICIES, bound_by_setup, member_by_setup
from silt.access_keys import check_access_key_id
from silt.auth.v1 import auth_pb2 as api
from silt.auth.v1 import auth_pb2_grpc as api_grpc
from silt.auth.v1 import model_pb2 as pb
from silt.errors import SILT_OWN_POLICY, FailedPrecondition, InvalidArgument, KeptBySetup, NotFound, PermissionDenied
from silt.iam_actions import (
    ATTACH_POLICY,
    DELETE_POLICY,
    OBJECT_ACTIONS,
    check_action,
    group_resource,
    policy_resource,
    user_resource,
)
from silt.iam_system import SYSTEM_GROUPS, SYSTEM_POLICIES, kept_binding, undeletable
from silt.rpc.channels import server_credentials
from silt.rpc.interceptor import current_principal
from silt.rpc.limits import AUTH_LIMITS
from silt.rpc.serve import serve
from silt.rpc.server import bind, build_server
from silt.service import service_config, startup_errors
from silt.source_address import MAX_ADDRESS_LENGTH, canonical
from silt.telemetry.health import kv_probe
from silt.telemetry.stores import open_observed_store

log = logging.getLogger(__name__)

MAX_AUTHORIZE_MANY = 1000
# A secret auth issues is 40 characters; Basic credentials carry whatever a client sends.
MAX_SECRET_LENGTH = 128


def _credential_info(credential: pb.Credential) -> api.CredentialInfo:
    return api.CredentialInfo(
        access_key_id=credential.access_key_id, user_id=credential.user_id, creation_date=credential.creation_date
    )


def _source(source_ip: str) -> str:
    """A decision request's source address, canonical; "" (unknown) stays unknown. Text that
    names no address is refused: a caller that sends one has a bug to hear about."""
    address = canonical(source_ip)
    if source_ip and not address:
        raise InvalidArgument(f"source_ip {source_ip[:MAX_ADDRESS_LENGTH]!r} is not an IPv4 or IPv6 address")
    return address


def _caller_source() -> str:
    """Where the current call's caller is, for the checks of what it may do itself."""
    return current_principal().source_ip


def _subject(user_id: str) -> str:
    """Requests about a user name the caller itself when they name nobody."""
    return user_id or current_principal().user_id


def _log_attachment(request: api.PolicyAttachmentRequest, change: str) -> None:
    principal = request.user_id or request.group_id
    log.info("policy %r %s %r by %s", request.policy_id, change, principal, describe_caller())


class AuthServicer(api_grpc.AuthServiceServicer):
    def __init__(self, model: IamModel, sessions: SessionTokens | None = None) -> None:
        self.model = model
        self.sessions = sessions or SessionTokens.ephemeral()
        # Uncached on purpose: the caller (another service's interceptor) caches the answer.
        self.authority = LocalAuthority(model)
        # The interceptor decided whether the caller may use a call; this, whether what the call
        # would give someone is something the caller holds itself (services/auth/grants.py).
        self.grants = Grants(model)

    # users
    def CreateUser(self, request: api.CreateUserRequest, context: grpc.ServicerContext) -> pb.User:
        user = self.model.create_user(request.id, request.description)
        log.info("user %r created by %s", user.id, describe_caller())
        return user

    def GetUser(self, request: api.GetUserRequest, context: grpc.ServicerContext) -> pb.User:
        return self.model.get_user(_subject(request.id))

    def ListUsers(self, request: api.ListUsersRequest, context: grpc.ServicerContext) -> api.ListUsersResponse:
        users, more = self.model.list_users(request.after, request.amount)
        return api.ListUsersResponse(users=users, has_more=more)

    def DeleteUser(self, request: api.DeleteUserRequest, context: grpc.ServicerContext) -> api.DeleteUserResponse:
        self.model.delete_user(request.id)
        log.info("user %r deleted by %s", request.id, describe_caller())
        return api.DeleteUserResponse()

    # groups
    def CreateGroup(self, request: api.CreateGroupRequest, context: grpc.ServicerContext) -> pb.Group:
        group = self.model.create_group(request.id, request.description)
        log.info("group %r created by %s", group.id, describe_caller())
        return group

    def GetGroup(self, request: api.GetGroupRequest, context: grpc.ServicerContext) -> pb.Group:
        return self.model.get_group(request.id)

    def ListGroups(self, request: api.ListGroupsRequest, context: grpc.ServicerContext) -> api.ListGroupsResponse:
        groups, more = self.model.list_groups(request.after, request.amount)
        return api.ListGroupsResponse(groups=groups, has_more=more)

    def DeleteGroup(self, request: api.DeleteGroupRequest, context: grpc.ServicerContext) -> api.DeleteGroupResponse:
        if request.id in SYSTEM_GROUPS:
            raise KeptBySetup(undeletable("group", request.id))
        self.grants.delete_group(current_principal().user_id, request.id)
        self.model.delete_group(request.id)
        log.info("group %r deleted by %s", request.id, describe_caller())
        return api.DeleteGroupResponse()

    def AddGroupMember(self, request: api.GroupMemberRequest, context: grpc.ServicerContext) -> api.GroupMemberResponse:
        self.grants.add_member(current_principal().user_id, request.group_id)
        self.model.add_member(request.group_id, request.user_id)
        log.info("user %r added to group %r by %s", request.user_id, request.group_id, describe_caller())
        return api.GroupMemberResponse()

    def RemoveGroupMember(
        self, request: api.GroupMemberRequest, context: grpc.ServicerContext
    ) -> api.GroupMemberResponse:
        if member_by_setup(request.group_id, request.user_id):
            raise KeptBySetup(kept_binding(f"membership of {request.user_id!r} in group {request.group_id!r}"))
        self.grants.remove_member(current_principal().user_id, request.group_id)
        self.model.remove_member(request.group_id, request.user_id)
        log.info("user %r removed from group %r by %s", request.user_id, request.group_id, describe_caller())
        return api.GroupMemberResponse()

    def ListGroupMembers(
        self, request: api.ListGroupMembersRequest, context: grpc.ServicerContext
    ) -> api.ListUsersResponse:
        users, more = self.model.list_members(request.group_id, request.after, request.amount)
        kept = [u.id for u in users if member_by_setup(request.group_id, u.id)]
        return api.ListUsersResponse(users=users, has_more=more, kept_by_setup=kept)

    def ListUserGroups(
        self, request: api.ListUserGroupsRequest, context: grpc.ServicerContext
    ) -> api.ListGroupsResponse:
        user_id = _subject(request.user_id)
        groups, more = self.model.list_user_groups(user_id, request.after, request.amount)
        kept = [g.id for g in groups if member_by_setup(g.id, user_id)]
        return api.ListGroupsResponse(groups=groups, has_more=more, kept_by_setup=kept)

    # policies
    def CreatePolicy(self, request: api.CreatePolicyRequest, context: grpc.ServicerContext) -> pb.Policy:
        self.grants.create_policy(current_principal().user_id, request.statements)
        policy = self.model.create_policy(request.id, request.statements, request.description)
        log.info("policy %r created by %s", policy.id, describe_caller())
        return policy

    def GetPolicy(self, request: api.GetPolicyRequest, context: grpc.ServicerContext) -> pb.Policy:
        return self.model.get_policy(request.id)

    def ListPolicies(self, request: api.ListPoliciesRequest, context: grpc.ServicerContext) -> api.ListPoliciesResponse:
        policies, more = self.model.list_policies(request.after, request.amount)
        return api.ListPoliciesResponse(policies=policies, has_more=more)

    def DeletePolicy(self, request: api.DeletePolicyRequest, context: grpc.ServicerContext) -> api.DeletePolicyResponse:
        if request.id in SYSTEM_POLICIES:
            raise KeptBySetup(undeletable("policy", request.id))
        self.grants.delete_policy(current_principal().user_id, request.id)
        self.model.delete_policy(request.id)
        log.info("policy %r deleted by %s", request.id, describe_caller())
        return api.DeletePolicyResponse()

    def UpdatePolicy(self, request: api.UpdatePolicyRequest, context: grpc.ServicerContext) -> pb.Policy:
        """Replace a policy's statements under its attachments (docs/design/auth.md, "Editing a
        policy"): checked as deleting it, creating it again and attaching it to every user and
        group that holds it, all on the one version the write is conditional on."""
        if request.id in SILT_POLICIES:
            raise FailedPrecondition(
                f"policy {request.id!r} {SILT_OWN_POLICY}: setup rewrites it at every start, so an edit "
                "would be undone. To restrict it, create a new policy with the statements you want "
                "(e.g. a copy of this one) and attach it instead of this one, or attach a policy with "
                "Deny statements next to it"
            )
        caller = current_principal().user_id
        resource = policy_resource(request.id)
        for action in (DELETE_POLICY, ATTACH_POLICY):
            if not self.authority.allowed_many(caller, action, [resource], _caller_source())[0]:
                raise PermissionDenied(f"user {caller!r} may not {action} on {resource} (updating replaces it)")
        read = self.model.read_policy(request.id)
        self._check_reach(caller, request.id)
        # Both ways: what the old statements denied is lifted, what the new ones allow is granted.
        self.grants.update_policy(caller, read[0], request.statements)
        # Conditional on the version checked: an edit or delete meanwhile aborts this one.
        policy = self.model.update_policy(request.id, request.statements, request.description or None, read=read)
        log.info("policy %r updated by %s", policy.id, describe_caller())
        return policy

    def _check_reach(self, caller: str, policy_id: str) -> None:
        """An edit reaches every principal the policy is attached to, as attaching it would,
        whatever the new statements hold (a Deny added can lock them out as surely as an Allow
        can escalate them): the caller needs AttachPolicy on each of them."""
        users, groups = self.model.policy_principals(policy_id)
        principals = [user_resource(u) for u in users] + [group_resource(g) for g in groups]
        if not principals:
            return
        allowed = self.authority.allowed_many(caller, ATTACH_POLICY, principals, _caller_source())
        for principal, ok in zip(principals, allowed, strict=True):
            if not ok:
                raise PermissionDenied(
                    f"user {caller!r} may not update policy {policy_id!r}: it is attached to {principal}, "
                    f"and an edit acts on it as attaching would (needs {ATTACH_POLICY} on {principal})"
                )

    def AttachPolicy(
        self, request: api.PolicyAttachmentRequest, context: grpc.ServicerContext
    ) -> api.PolicyAttachmentResponse:
        self.grants.attach_policy(current_principal().user_id, request.policy_id)
        self.model.attach_policy(request.policy_id, user_id=request.user_id, group_id=request.group_id)
        _log_attachment(request, "attached to")
        return api.PolicyAttachmentResponse()

    def DetachPolicy(
        self, request: api.PolicyAttachmentRequest, context: grpc.ServicerContext
    ) -> api.PolicyAttachmentResponse:
        if bound_by_setup(request.policy_id, request.user_id, request.group_id):
            holder = f"group {request.group_id!r}" if request.group_id else f"user {request.user_id!r}"
            raise KeptBySetup(kept_binding(f"policy {request.policy_id!r} on {holder}"))
        self.grants.detach_policy(current_principal().user_id, request.policy_id)
        self.model.detach_policy(request.policy_id, user_id=request.user_id, group_id=request.group_id)
        _log_attachment(request, "detached from")
        return api.PolicyAttachmentResponse()

    def ListUserPolicies(
        self, request: api.ListUserPoliciesRequest, context: grpc.ServicerContext
    ) -> api.ListPoliciesResponse:
        user_id = _subject(request.user_id)
        policies, more = self.model.list_user_policies(user_id, request.effective, request.after, request.amount)
        kept = [p.id for p in policies if bound_by_setup(p.id, user_id=user_id)]
        return api.ListPoliciesResponse(policies=policies, has_more=more, kept_by_setup=kept)

    def ListGroupPolicies(
        self, request: api.ListGroupPoliciesRequest, context: grpc.ServicerContext
    ) -> api.ListPoliciesResponse:
        policies, more = self.model.list_group_policies(request.group_id, request.after, request.amount)
        kept = [p.id for p in policies if bound_by_setup(p.id, group_id=request.group_id)]
        return api.ListPoliciesResponse(policies=policies, has_more=more, kept_by_setup=kept)

    # credentials
    def CreateCredentials(
        self, request: api.CreateCredentialsRequest, context: grpc.ServicerContext
    ) -> api.CreateCredentialsResponse:
        self.grants.issue_key(current_principal().user_id, request.user_id)
        issued = self.model.create_credentials(request.user_id)
        log.info(
            "access key %s issued to user %r by %s",
            issued.credential.access_key_id,
            request.user_id,
            describe_caller(),
        )
        return api.CreateCredentialsResponse(
            credential=_credential_info(issued.credential), secret_access_key=issued.secret.get_secret_value()
        )

    def ListCredentials(
        self, request: api.ListCredentialsRequest, context: grpc.ServicerContext
    ) -> api.ListCredentialsResponse:
        credentials, more = self.model.list_credentials(_subject(request.user_id), request.after, request.amount)
        return api.ListCredentialsResponse(credentials=[_credential_info(c) for c in credentials], has_more=more)

    def DeleteCredentials(
        self, request: api.DeleteCredentialsRequest, context: grpc.ServicerContext
    ) -> api.DeleteCredentialsResponse:
        self.model.delete_credentials(request.user_id, request.access_key_id)
        log.info("access key %s of user %r deleted by %s", request.access_key_id, request.user_id, describe_caller())
        return api.DeleteCredentialsResponse()

    # external principals: linking one is a way in as the user, so it is checked as issuing a key
    def CreateUserExternalPrincipal(
        self, request: api.CreateUserExternalPrincipalRequest, context: grpc.ServicerContext
    ) -> pb.ExternalPrincipal:
        self.grants.issue_key(current_principal().user_id, request.user_id)
        principal = self.model.create_external_principal(request.user_id, request.principal_id, request.settings)
        log.info("external principal %r linked to user %r by %s", principal.id, principal.user_id, describe_caller())
        return principal

    def DeleteUserExternalPrincipal(
        self, request: api.DeleteUserExternalPrincipalRequest, context: grpc.ServicerContext
    ) -> api.DeleteUserExternalPrincipalResponse:
        self.model.delete_external_principal(request.user_id, request.principal_id)
        log.info(
            "external principal %r unlinked from user %r by %s",
            request.principal_id,
            request.user_id,
            describe_caller(),
        )
        return api.DeleteUserExternalPrincipalResponse()

    def GetExternalPrincipal(
        self, request: api.GetExternalPrincipalRequest, context: grpc.ServicerContext
    ) -> pb.ExternalPrincipal:
        return self.model.get_external_principal(request.principal_id)

    def ListUserExternalPrincipals(
        self, request: api.ListUserExternalPrincipalsRequest, context: grpc.ServicerContext
    ) -> api.ListUserExternalPrincipalsResponse:
        principals, more = self.model.list_external_principals(_subject(request.user_id), request.after, request.amount)
        return api.ListUserExternalPrincipalsResponse(principals=principals, has_more=more)

    # decisions
    def Authorize(self, request: api.AuthorizeRequest, context: grpc.ServicerContext) -> api.AuthorizeResponse:
        allowed = self.authority.allowed_many(
            _subject(request.user_id),
            check_action(request.action),
            [check_resource(request.resource)],
            _source(request.source_ip),
        )
        return api.AuthorizeResponse(allowed=allowed[0])

    def AuthorizeMany(
        self, request: api.AuthorizeManyRequest, context: grpc.ServicerContext
    ) -> api.AuthorizeManyResponse:
        if len(request.resources) > MAX_AUTHORIZE_MANY:
            raise InvalidArgument(f"at most {MAX_AUTHORIZE_MANY} resources per call")
        # Checked before any decision: a caller cannot make auth match patterns over megabytes.
        resources = [check_resource(resource) for resource in request.resources]
        allowed = self.authority.allowed_many(
            _subject(request.user_id), check_action(request.action), resources, _source(request.source_ip)
        )
        return api.AuthorizeManyResponse(allowed=allowed)

    def AuthorizeKeys(
        self, request: api.AuthorizeKeysRequest, context: grpc.ServicerContext
    ) -> api.AuthorizeKeysResponse:
        if request.action not in OBJECT_ACTIONS:
            raise InvalidArgument(f"AuthorizeKeys answers for {', '.join(OBJECT_ACTIONS)}, not {request.action[:64]!r}")
        if not request.repository or "/" in request.repository:
            raise InvalidArgument("AuthorizeKeys needs a repository name")
        scope = self.authority.key_scope(
            _subject(request.user_id),
            request.action,
            check_resource(request.repository),
            request.branch,
            _source(request.source_ip),
        )
        return api.AuthorizeKeysResponse(every_key=scope.every_key, allow=scope.allow, deny=scope.deny)

    def WhoAmI(self, request: api.WhoAmIRequest, context: grpc.ServicerContext) -> api.WhoAmIResponse:
        principal = current_principal()
        return api.WhoAmIResponse(user=self.model.get_user(principal.user_id), access_key_id=principal.access_key_id)

    # signatures: checked here, with the secret, which never leaves (services/auth/signatures.py)
    def VerifyS3Signature(
        self, request: api.VerifyS3SignatureRequest, context: grpc.ServicerContext
    ) -> api.VerifyS3SignatureResponse:
        strings, signature = list(request.strings_to_sign), request.signature
        if request.version == api.S3_SIGNATURE_VERSION_V4:
            signatures.check_v4_scope(request.date, request.region, request.service, signatures.utc_now())
            owner = self.model.key_owner(check_access_key_id(request.access_key_id))
            key = signatures.verify_v4(
                owner.secret, strings, signature, request.date, request.region, request.service, signatures.utc_now()
            )
            if key is None:
                return api.VerifyS3SignatureResponse(valid=False)
            return api.VerifyS3SignatureResponse(valid=True, user_id=owner.user_id, signing_key=key)
        if request.version == api.S3_SIGNATURE_VERSION_V2:
            signatures.check_strings(strings, signature)
            owner = self.model.key_owner(check_access_key_id(request.access_key_id))
            if not signatures.verify_v2(owner.secret, strings, signature):
                return api.VerifyS3SignatureResponse(valid=False)
            return api.VerifyS3SignatureResponse(valid=True, user_id=owner.user_id)
        raise InvalidArgument("version must be S3_SIGNATURE_VERSION_V2 or S3_SIGNATURE_VERSION_V4")

    def GetCallSigningKey(
        self, request: api.GetCallSigningKeyRequest, context: grpc.ServicerContext
    ) -> api.GetCallSigningKeyResponse:
        signatures.check_call_scope(request.day, request.audience, signatures.utc_now())
        found = self.authority.call_key(check_access_key_id(request.access_key_id), request.day, request.audience)
        return api.GetCallSigningKeyResponse(user_id=found.user_id, signing_key=found.key)

    # REST API credentials: the API sends what its caller sent and learns only who that is.
    def _owner_if_secret(self, access_key_id: str, secret: str) -> pb.User | None:
        if len(secret) > MAX_SECRET_LENGTH:
            raise InvalidArgument(f"a secret access key has at most {MAX_SECRET_LENGTH} characters")
        owner = self.model.key_owner(check_access_key_id(access_key_id))
        if not secrets_match(owner.secret, secret):
            return None
        return self.model.get_user(owner.user_id)

    def VerifySecret(self, request: api.VerifySecretRequest, context: grpc.ServicerContext) -> api.VerifySecretResponse:
        user = self._owner_if_secret(request.access_key_id, request.secret_access_key)
        return api.VerifySecretResponse(valid=user is not None, user=user)

    def CreateSession(
        self, request: api.CreateSessionRequest, context: grpc.ServicerContext
    ) -> api.CreateSessionResponse:
        user = self._owner_if_secret(request.access_key_id, request.secret_access_key)
        if user is None:
            return api.CreateSessionResponse(valid=False)
        token, expires = self.sessions.issue(request.access_key_id, user.id, epoch=user.session_epoch)
        reply = api.CreateSessionResponse(valid=True, token=token, user=user)
        reply.expires.FromSeconds(expires)
        log.info("session opened for user %r (key %s)", user.id, request.access_key_id)
        return reply

    def RevokeSessions(
        self, request: api.RevokeSessionsRequest, context: grpc.ServicerContext
    ) -> api.RevokeSessionsResponse:
        user_id = _subject(request.user_id)
        self.model.revoke_sessions(user_id)
        log.info("sessions of user %r revoked by %s", user_id, describe_caller())
        return api.RevokeSessionsResponse()

    def VerifySession(
        self, request: api.VerifySessionRequest, context: grpc.ServicerContext
    ) -> api.VerifySessionResponse:
        session = self.sessions.check(request.token)
        if session is None:
            return api.VerifySessionResponse(valid=False)
        try:
            # The key (and its user) must still exist: deleting either ends its sessions.
            owner = self.model.key_owner(session.access_key_id)
            user = self.model.get_user(session.user_id)
        except NotFound:
            return api.VerifySessionResponse(valid=False)
        # A session of an earlier epoch was revoked; the user record read above says which is current.
        if owner.user_id != session.user_id or session.epoch != user.session_epoch:
            return api.VerifySessionResponse(valid=False)
        reply = api.VerifySessionResponse(valid=True, user=user, access_key_id=session.access_key_id)
        reply.expires.FromSeconds(session.expires)
        return reply

    # first-run setup through the REST API
    def GetSetupState(
        self, request: api.GetSetupStateRequest, context: grpc.ServicerContext
    ) -> api.GetSetupStateResponse:
        return api.GetSetupStateResponse(initialized=self.model.setup_record() is not None)

    def SetupAdmin(self, request: api.SetupAdminRequest, context: grpc.ServicerContext) -> api.SetupAdminResponse:
        user, issued = self.model.create_first_admin(request.user_id, ADMINS)
        log.info(
            "first admin user %r created with access key %s by %s",
            user.id,
            issued.credential.access_key_id,
            describe_caller(),
        )
        return api.SetupAdminResponse(
            user=user,
            credential=_credential_info(issued.credential),
            secret_access_key=issued.secret.get_secret_value(),
        )


def start(
    model: IamModel,
    address: str,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    health: HealthServicer | None = None,
    tls: grpc.ServerCredentials | None = None,
    sessions: SessionTokens | None = None,
) -> tuple[grpc.Server, int]:
    server = build_server(interceptors, health=health, limits=AUTH_LIMITS)
    api_grpc.add_AuthServiceServicer_to_server(AuthServicer(model, sessions), server)
    port = bind(server, address, tls)
    server.start()
    return server, port


def main(argv: list[str] | None = None) -> None:
    config = service_config("Run the auth gRPC service.", argv, "auth")
    with startup_errors("auth"):
        store = open_observed_store(config.database)
        model = IamModel(store, SecretBox(config.auth.encrypt_secret_key))
        tls = server_credentials(config.tls)
        assert config.auth.encrypt_secret_key is not None  # SecretBox refused to start without it
        sessions = SessionTokens.from_encrypt_key(config.auth.encrypt_secret_key, config.auth.session_ttl_seconds)
    if model.setup_record() is None:
        log.warning("auth is not set up yet: run `python -m services.auth.setup` to create the admin user")
    interceptor = local_interceptor(model, config.auth.cache_ttl_seconds, config.auth.max_clock_skew_seconds)
    serve(
        "auth",
        lambda health: start(
            model, config.auth.listen_address, [interceptor], health=health, tls=tls, sessions=sessions
        ),
        config=config,
        grpc_service=api.DESCRIPTOR.services_by_name["AuthService"],
        probes={"kv": kv_probe(store)},
        health_address=config.auth.health_listen_address,
        tls=tls is not None,
        close=[store.close],
    )


if __name__ == "__main__":
    main()
