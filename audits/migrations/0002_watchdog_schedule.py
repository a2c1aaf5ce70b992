"""Create the watchdog Schedule idempotently (update_or_create by name).

schedule() would raise on a duplicate name, and create() from start-up code
piles up a schedule per deploy; a migration runs once per database.
"""

from django.db import migrations


def create_watchdog(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="siteward-watchdog",
        defaults={"func": "audits.tasks.watchdog", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove_watchdog(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="siteward-watchdog").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("audits", "0001_initial"),
        ("django_q", "0018_task_success_index"),
    ]
    operations = [migrations.RunPython(create_watchdog, remove_watchdog)]
