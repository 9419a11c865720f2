"""Encryption at rest for secrets people give Campfire (a server's model API key).

A stored key is encrypted with a key derived from the operator's secret, and never shown again.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken

from engine.errors import CampfireError


class SecretBox:
    def __init__(self, secret: bytes) -> None:
        # Fernet wants exactly 32 url-safe base64 bytes; the operator's secret can be any
        # string, so it is stretched through SHA-256 with a purpose label.
        digest = hashlib.sha256(b"campfire/secret-box/v1\x00" + secret).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(digest))

    def encrypt(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode("ascii")

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode("ascii")).decode()
        except (InvalidToken, ValueError):
            raise CampfireError(
                "A stored secret could not be decrypted: the operator's secret key changed. "
                "Ask a server admin to enter the API key again."
            ) from None
