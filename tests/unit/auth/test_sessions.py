"""Session tokens of the REST API's login: only auth's key makes one, and one expires."""

from __future__ import annotations

from pydantic import SecretStr

from services.auth.sessions import MAX_TOKEN_LENGTH, Session, SessionTokens, secrets_match

KEY_ID = "AKIAIOSFODNN7EXAMPLE"


def test_a_token_names_its_key_and_user_until_it_expires() -> None:
    tokens = SessionTokens.ephemeral(ttl_seconds=60)
    token, expires = tokens.issue(KEY_ID, "alice@example.com", now=1000)
    assert expires == 1060
    assert tokens.check(token, now=1059) == Session(KEY_ID, "alice@example.com", 1060)
    assert tokens.check(token, now=1060) is None


def test_tokens_of_another_key_or_tampered_ones_are_refused() -> None:
    tokens = SessionTokens.from_encrypt_key(SecretStr("k" * 44), 60)
    again = SessionTokens.from_encrypt_key(SecretStr("k" * 44), 60)
    other = SessionTokens.from_encrypt_key(SecretStr("j" * 44), 60)
    token, _ = tokens.issue(KEY_ID, "alice", now=1000)
    assert again.check(token, now=1001) is not None, "the same auth key survives a restart"
    assert other.check(token, now=1001) is None
    body, _, mac = token.rpartition(".")
    assert tokens.check(body.replace("1060", "9999") + "." + mac, now=1001) is None
    assert tokens.check(token.replace(KEY_ID, "AKIAIOSFODNN7EXAMPLF"), now=1001) is None
    for junk in ("", ".", "v1....", "v1." + token[3:], "v3." + token[3:], token + "x" * MAX_TOKEN_LENGTH):
        assert tokens.check(junk, now=1001) is None


def test_secrets_compare_whole() -> None:
    assert secrets_match(SecretStr("abc"), "abc")
    assert not secrets_match(SecretStr("abc"), "abd")
    assert not secrets_match(SecretStr("abc"), "ab")
    assert not secrets_match(SecretStr("abc"), "abc\udcff")


def test_a_token_carries_the_epoch_it_was_opened_in() -> None:
    tokens = SessionTokens.ephemeral(ttl_seconds=60)
    token, _ = tokens.issue(KEY_ID, "alice", now=1000, epoch=7)
    session = tokens.check(token, now=1001)
    assert session is not None and session.epoch == 7
    body, _, mac = token.rpartition(".")
    assert tokens.check(body.replace(".7.", ".8.") + "." + mac, now=1001) is None, "the epoch is under the MAC"
