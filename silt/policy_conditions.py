"""Conditions of policy statements: lakeFS's IpAddress and NotIpAddress on SourceIp.

A statement applies to a request only when all its conditions hold. `IpAddress` holds when the
request's source address lies in one of the condition's values (an address, or a CIDR block;
IPv4 and IPv6), `NotIpAddress` when it lies in none.

**Unknown addresses fail closed.** A request whose source address is unknown (no address
reached auth: a Unix socket, a proxy that named no usable client) never meets an Allow's
condition, so an IP-limited Allow gives it nothing, and always meets a Deny's, so an IP-limited
Deny takes it. lakeFS skips such a statement either way; here a Deny never opens up because an
address went missing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from silt.auth.v1 import model_pb2 as pb
from silt.errors import InvalidArgument
from silt.source_address import MAX_ADDRESS_LENGTH, IPAddress, parse_address

SOURCE_IP = "SourceIp"
OPERATOR_NAMES = {
    pb.CONDITION_OPERATOR_IP_ADDRESS: "IpAddress",
    pb.CONDITION_OPERATOR_NOT_IP_ADDRESS: "NotIpAddress",
}
OPERATORS = {name: operator for operator, name in OPERATOR_NAMES.items()}
# One condition per operator (lakeFS's map has one key each), each a list of blocks: far above a
# real allow-list, and a decision stays a few hundred comparisons at most.
MAX_CONDITIONS = len(OPERATORS)
MAX_VALUES = 100
MAX_VALUE_LENGTH = MAX_ADDRESS_LENGTH  # the longest IPv6 block written out is 43 characters

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_block(value: str) -> Network | None:
    """An address (a block of one) or a CIDR block; None for anything else. Host bits past the
    prefix are allowed (`10.1.2.3/8` is `10.0.0.0/8`), as lakeFS and AWS accept them."""
    if not value or len(value) > MAX_VALUE_LENGTH or value != value.strip() or "%" in value:
        return None
    try:
        block = ipaddress.ip_network(value, strict=False)
    except ValueError:
        return None
    if isinstance(block, ipaddress.IPv6Network) and block.network_address.ipv4_mapped is not None:
        # `::ffff:10.0.0.0/104` is how a dual-stack socket writes 10.0.0.0/8; sources are unmapped.
        mapped = block.network_address.ipv4_mapped
        return ipaddress.IPv4Network((mapped, max(block.prefixlen - 96, 0)), strict=False)
    return block


def check_conditions(n: int, conditions: Sequence[pb.Condition]) -> None:
    """InvalidArgument naming statement n's first fault."""
    if len(conditions) > MAX_CONDITIONS:
        raise InvalidArgument(f"statement {n}: at most {MAX_CONDITIONS} conditions (one per operator)")
    seen: set[int] = set()
    for condition in conditions:
        name = OPERATOR_NAMES.get(condition.operator)
        if name is None:
            raise InvalidArgument(f"statement {n}: a condition's operator must be {' or '.join(OPERATORS)}")
        if condition.operator in seen:
            raise InvalidArgument(f"statement {n}: {name} given more than once")
        seen.add(condition.operator)
        if condition.field != SOURCE_IP:
            raise InvalidArgument(f"statement {n}: {name} supports the field {SOURCE_IP!r} only")
        if not condition.values:
            raise InvalidArgument(f"statement {n}: {name} needs at least one address or CIDR block")
        if len(condition.values) > MAX_VALUES:
            raise InvalidArgument(f"statement {n}: {name} lists at most {MAX_VALUES} addresses or CIDR blocks")
        for value in condition.values:
            if parse_block(value) is None:
                raise InvalidArgument(
                    f"statement {n}: {name} value {value[:MAX_VALUE_LENGTH]!r} is not an IPv4 or IPv6 address "
                    "or CIDR block"
                )


@dataclass(frozen=True)
class CompiledCondition:
    negated: bool
    blocks: tuple[Network, ...]

    def holds(self, source: IPAddress) -> bool:
        # An address never lies in a block of the other IP version (`in` says False).
        inside = any(source in block for block in self.blocks)
        return inside != self.negated


def compile_conditions(conditions: Sequence[pb.Condition]) -> tuple[CompiledCondition, ...] | None:
    """Stored conditions, compiled; None when one does not validate any more (a corrupt record):
    the caller then fails closed, as for an unknown address (`applies_unconditionally`)."""
    compiled = []
    for condition in conditions:
        blocks = tuple(parse_block(v) for v in condition.values)
        if condition.operator not in OPERATOR_NAMES or condition.field != SOURCE_IP or not blocks:
            return None
        if any(block is None for block in blocks):
            return None
        negated = condition.operator == pb.CONDITION_OPERATOR_NOT_IP_ADDRESS
        compiled.append(CompiledCondition(negated, tuple(b for b in blocks if b is not None)))
    return tuple(compiled)


def applies(conditions: Sequence[CompiledCondition], deny: bool, source: str) -> bool:
    """Whether a statement with these conditions applies to a request from source (text; ""
    when unknown): all hold; for an unknown source, a Deny applies and an Allow does not."""
    if not conditions:
        return True
    address = parse_address(source)
    if address is None:
        return deny
    return all(condition.holds(address) for condition in conditions)
