"""Siteward settings, read from the environment (see the README's table).

With no environment at all besides SECRET_KEY (or DEBUG=1) it runs on a SQLite
file in ``var/`` with the django-q2 ORM broker on the same database, so nothing
needs a server. ``DATABASE_URL=postgres://…`` switches to PostgreSQL.
"""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from .env import database_from_url, env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("SITEWARD_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (make run generates one in var/).")
    SECRET_KEY = "insecure-development-key-only-used-with-DEBUG=1"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_q",
    "audits",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Sets request.htmx, which the views read to answer with a partial.
    "django_htmx.middleware.HtmxMiddleware",
    # Everything needs a login except views marked @login_not_required (the login page).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_database_url = env_str("DATABASE_URL")
if not _database_url:
    # The zero-config default: a SQLite file in var/ (created here, since a fresh
    # clone has no var/ and SQLite will not create the folder).
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    _database_url = f"sqlite:///{VAR_DIR / 'siteward.sqlite3'}"
DATABASES = {"default": database_from_url(_database_url, base_dir=BASE_DIR)}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "audit-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# django-q2. The invariants (see RELIABILITY.md): the chunk's soft deadline <
# timeout < retry, bulk 1, failures acknowledged (our lease table and watchdog own
# every retry), no catch-up storm after downtime. audits.system_checks refuses to
# start with retry <= timeout or no timeout.
Q_CLUSTER = {
    "name": env_str("Q_CLUSTER_NAME", "siteward"),  # also the signing salt: never rename with tasks queued
    "orm": "default",
    "workers": env_int("Q_WORKERS", 2, minimum=1, maximum=64),
    "timeout": env_int("Q_TIMEOUT", 300, minimum=1),
    "retry": env_int("Q_RETRY", 420, minimum=2),
    "queue_limit": env_int("Q_WORKERS", 2, minimum=1, maximum=64),
    "bulk": 1,
    "poll": env_float("Q_POLL", 0.5, minimum=0.05),
    "ack_failures": True,
    "max_attempts": 1,
    "catch_up": False,
    "save_limit": 100,
    "recycle": 200,
    "max_rss": 512000,
    "compress": False,
    "scheduler": env_bool("Q_SCHEDULER", True),
    "guard_cycle": 0.5,
    "label": "Crawl queue",
}

# Crawl orchestration knobs (see docs/architecture.md for how they interact).
SITEWARD = {
    # Private and loopback targets are refused unless this is on: turn it on to
    # audit your own staging or local sites.
    "ALLOW_PRIVATE_TARGETS": env_bool("SITEWARD_ALLOW_PRIVATE", False),
    "MAX_RUNNING_AUDITS_PER_USER": env_int("SITEWARD_MAX_RUNNING_AUDITS", 3, minimum=1),
    "CHUNK_SIZE": env_int("SITEWARD_CHUNK_SIZE", 200, minimum=1, maximum=5000),
    "CHUNK_SOFT_DEADLINE": env_float("SITEWARD_CHUNK_SECONDS", 120.0, minimum=1.0),
    "LEASE_SECONDS": env_int("SITEWARD_LEASE_SECONDS", 180, minimum=2),
    "MAX_CHUNK_ATTEMPTS": env_int("SITEWARD_MAX_CHUNK_ATTEMPTS", 3, minimum=1),
    "STALL_SECONDS": env_int("SITEWARD_STALL_SECONDS", 900, minimum=5),
    # How long a queued/starting/finalizing audit may sit with no task before
    # the watchdog enqueues it again.
    "WATCHDOG_GRACE_SECONDS": env_int("SITEWARD_WATCHDOG_GRACE", 120, minimum=1),
    "FETCH_DEADLINE": env_float("SITEWARD_FETCH_DEADLINE", 30.0, minimum=1.0),
    "USER_AGENT": env_str("SITEWARD_USER_AGENT", "SitewardBot/0.1 (+self-hosted site audit)"),
    # Schedules: a cron expression may not run more often than this, and a person
    # may keep at most this many scheduled sites.
    "MIN_SCHEDULE_MINUTES": env_int("SITEWARD_MIN_SCHEDULE_MINUTES", 60, minimum=1),
    "MAX_SCHEDULED_SITES_PER_USER": env_int("SITEWARD_MAX_SCHEDULED_SITES", 20, minimum=0),
    # Where people reach this deployment: notifications link to it.
    "BASE_URL": env_str("SITEWARD_BASE_URL", "http://127.0.0.1:8000").rstrip("/"),
    # A webhook gets this long (seconds) to answer; its failure is recorded, never retried.
    "WEBHOOK_TIMEOUT": env_float("SITEWARD_WEBHOOK_TIMEOUT", 5.0, minimum=0.5),
}

# E-mail for notifications: printed to the console unless an SMTP server is configured.
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if env_str("EMAIL_HOST") else
    "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Siteward <siteward@localhost>")
