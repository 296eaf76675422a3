"""SecretKey: a key given directly wins; one from a secret is cached for max_age, then re-read."""

from __future__ import annotations

from context_ledger.aws_secrets import SecretKey


class FakeSecrets:
    """A secret store that counts reads (no AWS here; see the moto-backed integration test)."""

    def __init__(self, value: str) -> None:
        self.value, self.reads = value, 0

    def __call__(self, arn: str) -> str:
        self.reads += 1
        return self.value


def test_a_direct_value_wins_and_no_secret_is_read() -> None:
    store = FakeSecrets("from-secret")

    assert SecretKey("direct", "arn:x", read_secret=store)() == "direct"
    assert store.reads == 0


def test_nothing_configured_is_no_key() -> None:
    assert SecretKey(None, None)() is None


def test_a_secret_is_read_once_per_max_age_and_stripped() -> None:
    store, now = FakeSecrets(" k1\n"), [0.0]
    key = SecretKey(None, "arn:x", max_age=10, read_secret=store, clock=lambda: now[0])

    assert [key(), key()] == ["k1", "k1"]
    store.value, now[0] = "k2", 10.0
    assert key() == "k2"
    assert store.reads == 2


def test_an_empty_secret_is_no_key() -> None:
    assert SecretKey(None, "arn:x", read_secret=FakeSecrets("  "))() is None


def test_repr_never_shows_the_key() -> None:
    assert "direct" not in repr(SecretKey("direct", None))
