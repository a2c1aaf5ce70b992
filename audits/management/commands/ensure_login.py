"""Make sure someone can log in: create an admin account once and print its password once.

DJANGO_SUPERUSER_USERNAME / DJANGO_SUPERUSER_PASSWORD, when set, choose the login; a
password from the environment is never printed. Otherwise an ``admin`` user is
created with a generated password, printed only at creation (``manage.py
changepassword admin`` resets it).
"""

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create an admin login if none exists, printing its password once."

    def handle(self, *args, **options):
        User = get_user_model()
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME", "admin").strip() or "admin"
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
        user = User.objects.filter(username=username).first()
        if user is not None:
            if password:
                user.set_password(password)
                user.save(update_fields=["password"])
                self.stdout.write(f"Login: {username} (password from DJANGO_SUPERUSER_PASSWORD)")
            else:
                self.stdout.write(
                    f"Login: {username} (its password is the one printed when it was generated, or the last "
                    f"DJANGO_SUPERUSER_PASSWORD given; "
                    f"reset it with: .venv/bin/python manage.py changepassword {username})"
                )
            return
        # Only a generated password is printed: one from the environment is already known, and printed
        # it would land in container logs. An empty variable counts as unset, as for an existing user.
        if password:
            User.objects.create_superuser(username=username, email="", password=password)
            self.stdout.write(self.style.SUCCESS(
                f"Created login: {username} (password from DJANGO_SUPERUSER_PASSWORD)"))
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(self.style.SUCCESS(f"Created login: {username} / password: {password}"))
        self.stdout.write("This password is shown only once; note it down.")
