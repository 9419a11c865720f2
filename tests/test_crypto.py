import pytest

from engine.errors import CampfireError
from engine.platform.crypto import SecretBox


def test_a_secret_round_trips_and_is_not_stored_in_clear():
    box = SecretBox(b"operator secret")
    token = box.encrypt("sk-live-123")
    assert "sk-live-123" not in token
    assert box.decrypt(token) == "sk-live-123"


def test_a_changed_operator_key_gives_a_readable_error():
    token = SecretBox(b"old secret").encrypt("sk-live-123")
    with pytest.raises(CampfireError, match="enter the API key again"):
        SecretBox(b"new secret").decrypt(token)
