"""Siteward settings, read from the environment (see the README's table).

With no environment at all besides SECRET_KEY (or DEBUG=1) it runs on a SQLite
file in ``var/`` with the django-q2 ORM broker on the same database, so nothing
needs a server. ``DATABASE_URL=postgres://…`` switches to PostgreSQL.
"""

from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from .env import database_from_url, env_bool, env_choice, env_float, env_int, env_list, env_str

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
    # Before django_q: its qcluster command is audits' own (audits/management/commands/qcluster.py).
    "audits",
    "django_q",
    "axes",
    "csp",
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
    # Everything needs a login except views marked @login_not_required (the login page);
    # an htmx request (a poll) is told to reload the page rather than sent to the login form.
    "config.login_required.HtmxLoginRequiredMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: turns a refused (locked-out) login into the lockout page.
    "axes.middleware.AxesMiddleware",
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
# django-axes sees every login attempt first and refuses one that is locked out;
# Django's own backend then checks the password.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
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
# `manage.py serve` (make serve) turns this on for its web server: WhiteNoise serves the
# files `collectstatic` gathered in STATIC_ROOT, under content-hashed names with gzip and
# Brotli variants and far-future caching. Off (make run, the tests), `{% static %}` needs
# no collectstatic and runserver serves the files from static/ and the apps.
SERVE_STATIC = env_bool("SITEWARD_SERVE_STATIC", False)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage" if SERVE_STATIC
        else "django.contrib.staticfiles.storage.StaticFilesStorage",
    },
}
if SERVE_STATIC:
    MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                      "whitenoise.middleware.WhiteNoiseMiddleware")

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Behind a TLS-terminating reverse proxy that sets X-Forwarded-Proto (and strips any
# the client sent): trust it to say the request came over HTTPS.
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# With SECURE_COOKIES the site is served over HTTPS only: plain HTTP is redirected, and
# browsers are told (HSTS) to use HTTPS for a year.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", SESSION_COOKIE_SECURE)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if SESSION_COOKIE_SECURE else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# Preloading commits the whole registrable domain to HTTPS in every browser, a decision
# for the domain's owner rather than this app: opt-in, and check --deploy's reminder
# (security.W021) stays quiet unless it is.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]

# Content-Security-Policy (django-csp): nothing inline, nothing from elsewhere. htmx and
# the one script of our own are static files; htmx's indicator <style> is switched off
# in base.html. Inline style *attributes* stay allowed: the progress bar's width is one.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "style-src-attr": [UNSAFE_INLINE],
        "img-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}

# Failed logins (django-axes): five failures of one username from one address lock that
# pair out for 15 minutes after the last attempt; the correct password is refused too
# until then. `manage.py axes_reset` (or the admin's Access attempts) unlocks early.
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked.html"
# How many reverse proxies in front append to X-Forwarded-For (nginx with
# `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`: 1). Behind them the
# connection's address is the proxy's, so the client's is read from that header; 0
# (no proxy) uses the connection's address and ignores the header, which anyone can send.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0, maximum=10)


AXES_CLIENT_IP_CALLABLE = "config.client_ip.client_network"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR",
                                                                               "CRITICAL"))},
    # django-axes announces itself at INFO on every start, manage.py commands included;
    # its lockout warnings (axes.handlers) still go through.
    "loggers": {"axes.apps": {"level": "WARNING"}},
}

# django-q2. The invariants (see RELIABILITY.md): the chunk's soft deadline <
# timeout < retry, bulk 1, failures acknowledged (our lease table and watchdog own
# every retry), no catch-up storm after downtime. audits.system_checks refuses to
# start with retry <= timeout or no timeout.
Q_CLUSTER = {
    # The signing salt every cluster shares: never rename with tasks queued. Which
    # queue a cluster serves is Q_CLUSTER_NAME: unset, the crawl queue; "render",
    # the rendered audits' (ALT_CLUSTERS below), which only a machine with Chromium runs.
    "name": env_str("SITEWARD_Q_PREFIX", "siteward"),
    "orm": "default",
    # The ORM broker, except that a cluster takes a task only when one of its workers
    # is free (audits.q_broker, with our qcluster's sentinel): clusters sharing the
    # database never hold tasks another could start. queue_limit below is then
    # never reached, only a bound.
    "broker_class": "audits.q_broker.SlotBroker",
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
    # Seconds between the sentinel's checks of its workers. django-q2 runs the scheduler
    # once 30 s of these add up, so a cycle of 30 makes it look at once on start.
    "guard_cycle": env_float("Q_GUARD_CYCLE", 0.5, minimum=0.1),
    "label": "Crawl queue",
    "ALT_CLUSTERS": {
        # Rendering is slow and memory-hungry: few workers, no scheduler (the
        # crawl cluster runs the watchdog), each with Chromium beside it.
        "render": {
            "workers": env_int("SITEWARD_RENDER_WORKERS", 1, minimum=1, maximum=16),
            "queue_limit": env_int("SITEWARD_RENDER_WORKERS", 1, minimum=1, maximum=16),
            "scheduler": False,
            "label": "Render queue",
        },
    },
}
# The django-q2 queue (a cluster name) rendered audits' steps go to.
RENDER_QUEUE = "render"

# Crawl orchestration knobs (see docs/architecture.md for how they interact).
SITEWARD = {
    # Private and loopback targets are refused unless this is on: turn it on to
    # audit your own staging or local sites.
    "ALLOW_PRIVATE_TARGETS": env_bool("SITEWARD_ALLOW_PRIVATE", False),
    "MAX_RUNNING_AUDITS_PER_USER": env_int("SITEWARD_MAX_RUNNING_AUDITS", 3, minimum=1),
    "MAX_AUDITS_PER_HOUR": env_int("SITEWARD_MAX_AUDITS_PER_HOUR", 30, minimum=1),
    "MAX_AUDITS_PER_HOUR_PER_ADDRESS": env_int("SITEWARD_MAX_AUDITS_PER_HOUR_PER_ADDRESS", 100, minimum=1),
    "CHUNK_SIZE": env_int("SITEWARD_CHUNK_SIZE", 200, minimum=1, maximum=5000),
    "CHUNK_SOFT_DEADLINE": env_float("SITEWARD_CHUNK_SECONDS", 120.0, minimum=1.0),
    # A running chunk heartbeats every third of this: a dead worker's chunk is
    # reclaimed after three missed beats. With the watchdog at every scheduler
    # pass (30 s), a killed cluster's chunks run again within a minute.
    "LEASE_SECONDS": env_int("SITEWARD_LEASE_SECONDS", 15, minimum=3),
    "MAX_CHUNK_ATTEMPTS": env_int("SITEWARD_MAX_CHUNK_ATTEMPTS", 3, minimum=1),
    # Chunks of one audit that may run at once, on any clusters: they lease
    # disjoint URLs and share the audit's concurrency and rate. SQLite has one
    # writer at a time, so there more chunks would only queue on its lock.
    "CHUNKS_PER_AUDIT": env_int(
        "SITEWARD_CHUNKS_PER_AUDIT", 1 if DATABASES["default"]["ENGINE"].endswith("sqlite3") else 4,
        minimum=1, maximum=64),
    "STALL_SECONDS": env_int("SITEWARD_STALL_SECONDS", 900, minimum=5),
    # An audit whose next task no worker has taken for this long fails as stalled, saying so: no
    # cluster serves its queue (a rendered audit without a render cluster), and a schedule would
    # otherwise skip every later run as "still running", alerting nobody.
    "QUEUE_WAIT_SECONDS": env_int("SITEWARD_QUEUE_WAIT_SECONDS", 43200, minimum=60),
    # How long a queued/starting/finalizing audit may sit with no task before
    # the watchdog enqueues it again.
    "WATCHDOG_GRACE_SECONDS": env_int("SITEWARD_WATCHDOG_GRACE", 120, minimum=1),
    # A chunk retries a locked or unreachable database this long before giving the
    # chunk back; a worker that cannot reach it for DB_UNAVAILABLE_SECONDS fails the audit.
    "DB_RETRY_SECONDS": env_float("SITEWARD_DB_RETRY_SECONDS", 30.0, minimum=1.0),
    "DB_UNAVAILABLE_SECONDS": env_float("SITEWARD_DB_UNAVAILABLE_SECONDS", 300.0, minimum=1.0),
    "FETCH_DEADLINE": env_float("SITEWARD_FETCH_DEADLINE", 30.0, minimum=1.0),
    # Pauses (seconds) before robots.txt is asked again after a 5xx or 429 answer, at the start of
    # an audit; once they are spent (or the start step's time), the audit fails as robots_unreachable.
    "ROBOTS_RETRY_SECONDS": (15.0, 45.0),
    # RFC 9309 section 2.4: a crawler should not use a robots.txt read more than a day ago.
    "ROBOTS_MAX_AGE": env_int("SITEWARD_ROBOTS_MAX_AGE", 86400, minimum=1),
    "USER_AGENT": env_str("SITEWARD_USER_AGENT", "SitewardBot/0.1 (+self-hosted site audit)"),
    # Schedules: a cron expression may not run more often than this, and a person
    # may keep at most this many scheduled sites.
    "MIN_SCHEDULE_MINUTES": env_int("SITEWARD_MIN_SCHEDULE_MINUTES", 60, minimum=1),
    "MAX_SCHEDULED_SITES_PER_USER": env_int("SITEWARD_MAX_SCHEDULED_SITES", 20, minimum=0),
    # Where people reach this deployment: notifications link to it.
    "BASE_URL": env_str("SITEWARD_BASE_URL", "http://127.0.0.1:8000").rstrip("/"),
    # A webhook gets this long (seconds) to answer (each of its at most three tries, audits.notify).
    "WEBHOOK_TIMEOUT": env_float("SITEWARD_WEBHOOK_TIMEOUT", 5.0, minimum=0.5),
    # Rendered audits: the system's Chromium (Playwright never downloads one),
    # pages rendered at once per chunk, and each page's deadline (seconds).
    "CHROMIUM": env_str("SITEWARD_CHROMIUM", "/usr/bin/chromium"),
    "RENDER_PAGES": env_int("SITEWARD_RENDER_PAGES", 2, minimum=1, maximum=16),
    "RENDER_DEADLINE": env_float("SITEWARD_RENDER_DEADLINE", 15.0, minimum=1.0),
}

# Site secrets (basic-auth passwords, header tokens, login passwords) are encrypted
# at rest with a key derived from this, or from SECRET_KEY when it is not set.
# Set it to keep secrets readable across a SECRET_KEY rotation.
SITEWARD_FIELD_KEY = env_str("SITEWARD_FIELD_KEY", "")

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
