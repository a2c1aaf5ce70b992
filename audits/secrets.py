"""Site secrets (passwords, tokens, cookies) encrypted at rest with Fernet.

The key is derived (HKDF-SHA256) from ``SITEWARD_FIELD_KEY`` when it is set,
else from ``SECRET_KEY``: a database dump alone does not reveal a site's
password. Rotating the key makes stored secrets unreadable; ``unseal`` then
raises ``SecretUnreadable`` and the person sets them again.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac

from django.conf import settings


class SecretUnreadable(Exception):
    """A stored secret no longer decrypts (the key changed): it must be set again."""


@functools.cache
def _fernet(key_material: str):
    # Imported here: cryptography adds about 7 MB to every process that loads the
    # models (web, workers, the audit command), and only private sites need it.
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
               info=b"siteward site secrets").derive(key_material.encode())
    return Fernet(base64.urlsafe_b64encode(key))


def _key_material() -> str:
    return getattr(settings, "SITEWARD_FIELD_KEY", "") or settings.SECRET_KEY


def fingerprint(text: str) -> str:
    """A keyed digest of ``text`` (HMAC-SHA256 under the same key): equal texts match, none can be read back."""
    return hmac.new(_key_material().encode(), text.encode(), hashlib.sha256).hexdigest()


def seal(text: str) -> str:
    """``text`` encrypted (authenticated); the empty string stays empty ("not set")."""
    if not text:
        return ""
    return _fernet(_key_material()).encrypt(text.encode()).decode("ascii")


def unseal(token: str) -> str:
    """What ``seal`` stored; SecretUnreadable if it was sealed under another key or altered."""
    if not token:
        return ""
    from cryptography.fernet import InvalidToken

    try:
        return _fernet(_key_material()).decrypt(token.encode("ascii")).decode()
    except (InvalidToken, ValueError) as exc:
        raise SecretUnreadable("A stored secret cannot be decrypted; set it again.") from exc


def readable(token: str) -> bool:
    """Whether ``unseal`` can read ``token`` under the current key (an empty one is "not set", readable)."""
    try:
        unseal(token)
    except SecretUnreadable:
        return False
    return True
