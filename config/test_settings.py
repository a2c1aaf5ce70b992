"""Settings for the test suite: the real settings plus test-only speed-ups.

CI runs the suite twice, once on the default SQLite file and once with
DATABASE_URL pointing at PostgreSQL; nothing here changes the database.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-use-0123456789")

from .settings import *  # noqa: E402,F403

# Hashing passwords with PBKDF2 dominates login-heavy tests; MD5 is fine for fixtures.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
