from django.apps import AppConfig


class AuditsConfig(AppConfig):
    name = "audits"
    verbose_name = "Site audits"

    def ready(self):
        # Registers the django-q2 configuration check (see system_checks.py).
        from . import system_checks  # noqa: F401
