"""The models and the one migration agree: a model change folded into 0001_initial, not left out of it."""

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_the_models_need_no_migration_beyond_the_one_there_is(capsys):
    # --check exits non-zero when the models differ from what the migrations build.
    call_command("makemigrations", "audits", "--check", "--dry-run")
    assert "No changes detected" in capsys.readouterr().out
