"""A pytest-httpserver on 127.0.0.1 that answers every request with one handler: the base of the test sites."""

from __future__ import annotations

from pytest_httpserver import HTTPServer


class Loopback:
    """``handler(request) -> Response`` answers every path; use as a context manager."""

    def __init__(self, handler):
        self.server = HTTPServer(host="127.0.0.1", port=0)
        self.server.expect_request("").respond_with_handler(handler)

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.clear()
        if self.server.is_running():
            self.server.stop()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.server.port}{path}"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"
