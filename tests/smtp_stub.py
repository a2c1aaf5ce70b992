"""A mail server on 127.0.0.1 that speaks just enough SMTP, and answers each connection as a test scripts it.

``script`` holds one entry per connection, in order (the last one repeats):
``"ok"`` takes the message; ``"421"`` turns the connection away at the greeting;
``"450"`` or ``"550"`` refuses the recipient with that code. ``connections``
counts them; ``messages`` holds what was taken.
"""

from __future__ import annotations

import socketserver
import threading


class SMTPStub:
    def __init__(self, *script: str):
        self.script = list(script) or ["ok"]
        self.connections = 0
        self.messages: list[str] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                with stub._lock:
                    answer = stub.script[min(stub.connections, len(stub.script) - 1)]
                    stub.connections += 1
                stub._converse(self, answer)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]

    def _converse(self, handler, answer: str) -> None:
        def say(line: str) -> None:
            handler.wfile.write(line.encode() + b"\r\n")

        if answer == "421":
            say("421 4.3.2 Too busy, try again later")
            return
        say("220 stub ESMTP")
        while line := handler.rfile.readline(4096):
            verb = line[:4].decode("ascii", "replace").upper()
            if verb in ("EHLO", "HELO"):
                say("250 stub")
            elif verb == "MAIL":
                say("250 OK")
            elif verb == "RCPT":
                say({"450": "450 4.2.0 Greylisted, try again later",
                     "550": "550 5.1.1 No such user"}.get(answer, "250 OK"))
            elif verb == "DATA":
                say("354 End data with <CR><LF>.<CR><LF>")
                body = []
                while (part := handler.rfile.readline(65536)) not in (b".\r\n", b""):
                    body.append(part.decode("utf-8", "replace"))
                with self._lock:
                    self.messages.append("".join(body))
                say("250 OK queued")
            elif verb == "QUIT":
                say("221 Bye")
                return
            else:
                say("250 OK")

    def __enter__(self) -> SMTPStub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
