"""Serving the app with uvicorn, on a socket bound before anything is printed.

Binding first means a port in use is an error at once, and ``--port 0``
prints the port the system picked. uvicorn's access log is off: addresses can
carry the token (``?token=``) and job IDs, and a terminal is no place for either.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from starlette.applications import Starlette

from jobkit.core.errors import JobKitError


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``0``: any free port).

    Raises:
        JobKitError: the address cannot be bound (in use, not this machine's).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise JobKitError(f"cannot serve on {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        hint = ": stop the other process or pass --port" if exc.errno in (98, 48) else ""
        raise JobKitError(f"cannot serve on {host}:{port}: {exc.strerror}{hint}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url(sock: socket.socket, token: str | None) -> str:
    """The address to open: the socket's, with the token once."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def serve(app: Starlette, sock: socket.socket, *, on_ready: Callable[[], None] | None = None) -> None:
    """Serve until Ctrl-C (or SIGTERM)."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, server_header=False, lifespan="off")
    server = uvicorn.Server(config)
    if on_ready is not None:
        on_ready()
    server.run(sockets=[sock])
