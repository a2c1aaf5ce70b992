"""The text box for a web address: it never shows back a user name or password typed into one.

The forms refuse an address holding ``user:password@`` (it would be stored and
shown in the clear), but a refused field re-renders what was posted; this
widget renders it with the user name and password taken out, whatever the
error, so the page never carries the password.
"""

from __future__ import annotations

import re

from django import forms

# The userinfo of an address as typed, parsed or not: after "scheme://" or "//", or from the start when the
# scheme was left out ("ann:pw@host"), up to the last "@" before the path. "mailto:ann@host" is no login.
_USERINFO = re.compile(r"^(\s*(?:[A-Za-z][A-Za-z0-9+.\-]*:)?[/\\]{2})?(?!\s*mailto:)[^/?#]*@", re.IGNORECASE)


def without_userinfo(text: str) -> str:
    """``text`` with the user name and password of its address taken out, the rest as typed."""
    return _USERINFO.sub(lambda match: match.group(1) or "", text, count=1)


class AddressInput(forms.TextInput):
    """A text input that renders an address without its user name and password."""

    def format_value(self, value):
        value = super().format_value(value)
        return None if value is None else without_userinfo(value)


class URLAddressInput(AddressInput):
    input_type = "url"
