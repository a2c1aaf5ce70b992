from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_delete, post_migrate

# Every 15 seconds (croniter's sixth field is seconds), so the watchdog is due at
# every pass of django-q2's scheduler, which looks every 30 s: a dead worker's
# chunk (lease 15 s) runs again within a minute of the kill. A MINUTES schedule
# could not go below 60 s plus the pass, 90 s at worst.
WATCHDOG_CRON = "* * * * * */15"


def ensure_watchdog_schedule(sender=None, using="default", **kwargs):
    """Create (or correct) the watchdog Schedule, idempotently, after every migrate.

    update_or_create by name: schedule() would raise on a duplicate name, and
    create() at start-up piles up one schedule per deploy. post_migrate (rather
    than a data migration) also restores it after a flush.
    """
    # Imported here: django_q's models cannot load before the app registry is ready.
    from django_q.models import Schedule

    # post_migrate follows every migrate, also `migrate audits` on a database
    # django_q's tables are not in yet: the schedule waits for the migrate that
    # creates them (which sends post_migrate again).
    if Schedule._meta.db_table not in connections[using].introspection.table_names():
        return
    Schedule.objects.using(using).update_or_create(
        name="siteward-watchdog",
        defaults={"func": "audits.tasks.watchdog", "schedule_type": Schedule.CRON, "cron": WATCHDOG_CRON,
                  "minutes": None, "repeats": -1},
    )


def remove_site_schedule(sender, instance, **kwargs):
    from .schedules import remove  # imports models: only once the registry is ready

    remove(instance.pk)


class AuditsConfig(AppConfig):
    name = "audits"
    verbose_name = "Site audits"

    def ready(self):
        # Registers the django-q2 configuration check.
        from . import system_checks  # noqa: F401

        post_migrate.connect(ensure_watchdog_schedule, sender=self)
        # A site's schedule goes with it, also when the site goes with its owner
        # (a cascade, which calls no delete() of ours).
        post_delete.connect(remove_site_schedule, sender=self.get_model("Site"))
