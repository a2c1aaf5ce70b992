"""Site secrets are stored encrypted, under a key of the deployment's."""

import pytest

from audits.secrets import SecretUnreadable, seal, unseal


def test_a_sealed_secret_reads_back_and_does_not_contain_the_plain_text():
    token = seal("hunter2-password")
    assert "hunter2" not in token
    assert unseal(token) == "hunter2-password"
    assert seal("hunter2-password") != token  # a fresh IV each time: equal secrets do not show as equal


def test_nothing_set_stays_empty():
    assert seal("") == "" and unseal("") == ""


def test_a_separate_field_key_takes_precedence_and_another_key_cannot_read_it(settings):
    settings.SITEWARD_FIELD_KEY = "field-key-one"
    token = seal("s3cret")
    settings.SITEWARD_FIELD_KEY = "field-key-two"
    with pytest.raises(SecretUnreadable, match="set it again"):
        unseal(token)
    settings.SITEWARD_FIELD_KEY = "field-key-one"
    assert unseal(token) == "s3cret"


def test_an_altered_secret_is_refused_not_misread():
    token = seal("s3cret")
    with pytest.raises(SecretUnreadable):
        unseal(token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"))
