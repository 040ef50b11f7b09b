"""Destructive repository administration is not writing: GC rules and runs, refs dump and restore
need their own actions, which admins hold and writers do not; GC's own user holds a run only.

Through real auth and graveler servers; the probes (what each call needs, made ready as the
admin) are the matrix's.
"""

from __future__ import annotations

import grpc
import pytest

from services.auth.setup import DEVELOPERS
from silt import iam_actions as a
from silt.graveler.v1 import graveler_pb2 as api
from tests.integration.auth.support import Stack, code_of, details_of
from tests.integration.auth.test_matrix import PROBES

METHODS = {
    "SetGCRules": a.SET_GC_RULES,
    "DeleteGCRules": a.DELETE_GC_RULES,
    "PrepareGC": a.PREPARE_GC,
    "DumpRefs": a.DUMP_REFS,
    "RestoreRefs": a.RESTORE_REFS,
}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_developer_may_not_but_an_admin_may(stack: Stack, method: str) -> None:
    action = METHODS[method]
    _, developer = stack.new_user([DEVELOPERS], prefix="developer")
    assert code_of(PROBES[a.WRITE_REPO](stack, developer)) == grpc.StatusCode.OK  # a writer indeed
    denied = PROBES[action](stack, developer)
    assert code_of(denied) == grpc.StatusCode.PERMISSION_DENIED
    assert action in details_of(denied)
    assert code_of(PROBES[action](stack, stack.admin)) == grpc.StatusCode.OK


def test_gc_user_may_run_gc_and_nothing_else(stack: Stack) -> None:
    gc = stack.services["gc"]
    repo = stack.new_repo()
    assert code_of(lambda: stack.gv(gc).GetRepository(api.GetRepositoryRequest(name=repo))) == grpc.StatusCode.OK
    assert code_of(PROBES[a.PREPARE_GC](stack, gc)) == grpc.StatusCode.OK
    for action in (a.SET_GC_RULES, a.DELETE_GC_RULES, a.DUMP_REFS, a.RESTORE_REFS, a.WRITE_REPO, a.CREATE_USER):
        assert code_of(PROBES[action](stack, gc)) == grpc.StatusCode.PERMISSION_DENIED, action
