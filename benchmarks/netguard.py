"""Refuse every outbound connection that is not to 127.0.0.0/8 or ::1, in this process.

The benchmarks only ever talk to a loopback server, but third-party code they
load (Scrapy pulls in tldextract, which can try to download a suffix list) must
not reach the outside either; this makes that a hard error instead of a hope.
"""

from __future__ import annotations

import ipaddress
import socket

_original_connect = socket.socket.connect
_original_connect_ex = socket.socket.connect_ex


def _check(address) -> None:
    if isinstance(address, tuple):
        try:
            ip = ipaddress.ip_address(address[0])
        except ValueError:
            raise ConnectionRefusedError(
                f"benchmark guard: refusing named host {address[0]!r}"
            ) from None
        if not ip.is_loopback:
            raise ConnectionRefusedError(f"benchmark guard: refusing non-loopback {ip}")


def _connect(self, address):
    _check(address)
    return _original_connect(self, address)


def _connect_ex(self, address):
    _check(address)
    return _original_connect_ex(self, address)


def _guard_uvloop() -> None:
    """uvloop dials in C (libuv), past the socket methods above: guard its
    create_connection too. Our crawler hands it an address it has already
    resolved, so a host that is not an IP literal is refused like any other."""
    try:
        import uvloop
    except ImportError:
        return
    original = uvloop.Loop.create_connection

    async def create_connection(self, protocol_factory, host=None, port=None, **kwargs):
        if host is not None:
            _check((host, port))
        if kwargs.get("sock") is not None:
            _check(kwargs["sock"].getpeername())
        return await original(self, protocol_factory, host, port, **kwargs)

    uvloop.Loop.create_connection = create_connection  # type: ignore[method-assign]


def refuse_non_loopback() -> None:
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
    _guard_uvloop()
