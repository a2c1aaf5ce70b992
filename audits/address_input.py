"""The text box for a web address: it shows back no user name or password typed into one.

The forms refuse an address holding ``user:password@`` (it would be stored and
shown in the clear), but a refused field re-renders what was posted; this
widget renders it with the user name and password taken out, whatever the
error. One typing cannot be told from a valid address and is shown as typed: a
password cut short by "/", "?" or "#" after digits that make a port
("https://ann:8080/x@host/" is also host "ann", port 8080, path "/x@host/").
"""

from __future__ import annotations

import re

from django import forms

# The userinfo of an address as typed, parsed or not: after "scheme://" or "//", or from the start when the
# scheme was left out ("ann:pw@host"), up to the last "@" before the path. "mailto:ann@host" is no login.
_USERINFO = re.compile(r"^(\s*(?:[A-Za-z][A-Za-z0-9+.\-]*:)?[/\\]{2})?(?!\s*mailto:)[^/?#]*@", re.IGNORECASE)


# A password holding a raw "/", "?" or "#" ends the authority there (the URL standard: "https://ann:pa/ss@host/"
# is host "ann", port "pa"), so _USERINFO finds no login. When the text after the ":" is no port (_is_port) and
# an "@" comes later, the login runs from the "//" to the "@" that ends the next run of "@"s without "/", "?"
# or "#" between them: an "@" further on (an e-mail address in the query) is the rest of the address.
_CUT_PASSWORD = re.compile(
    r"^(\s*(?:[A-Za-z][A-Za-z0-9+.\-]*:)?[/\\]{2})[^/?#@:\[]*:([^/?#@]*)[/?#][^@]*@(?:[^/?#@]*@)*")


def _is_port(text: str) -> bool:
    """Whether ``text`` after a host's ":" is a port as the URL standard reads one (empty: the default)."""
    return text == "" or (text.isascii() and text.isdigit() and int(text) < 65536)


def without_userinfo(text: str) -> str:
    """``text`` with the user name and password of its address taken out, the rest as typed; "" when
    where the login ends cannot be told."""
    text = _USERINFO.sub(lambda match: match.group(1) or "", text, count=1)
    cut = _CUT_PASSWORD.match(text)
    if cut is None or _is_port(cut.group(2)):
        return text
    text = cut.group(1) + text[cut.end():]
    # An "@" still before the query after a cut password ("ann:p/w@x/y@host"): which "@" ended the login is
    # anyone's guess, so none of it is shown.
    return "" if "@" in re.split(r"[?#]", text, maxsplit=1)[0] else text


class AddressInput(forms.TextInput):
    """A text input that renders an address without its user name and password."""

    def format_value(self, value):
        value = super().format_value(value)
        return None if value is None else without_userinfo(value)


class URLAddressInput(AddressInput):
    input_type = "url"
