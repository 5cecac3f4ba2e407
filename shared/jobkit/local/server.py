"""The emulated AWS API on a loopback port, for other processes (``jobkit local up``).

moto's app on a threaded werkzeug server that logs no line per request (errors
still are). The socket is bound before the server's thread starts, so that a
port in use is an error at once: werkzeug, binding in that thread, would print
its own message and end only the thread, and the caller would wait forever.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from jobkit.core.errors import JobKitError

if TYPE_CHECKING:
    from werkzeug.serving import BaseWSGIServer


class LocalStackError(JobKitError):
    """The local stack cannot start."""


class PortInUse(LocalStackError):
    """Another process listens on the port the local stack was to serve on."""

    def __init__(self, host: str, port: int, remedy: str = "stop the other process or choose another port") -> None:
        self.host = host
        self.port = port
        super().__init__(f"port {port} on {host} is in use: {remedy}")


@contextmanager
def serving_aws(host: str, port: int, *, wrap: Callable[[Any], Any] | None = None) -> Iterator[str]:
    """Serve the AWS API on ``host``:``port`` (0: a free port) while the block runs;
    yields the endpoint URL. ``wrap`` takes moto's WSGI app and returns the one
    to serve (jobkit's own routes in front of it).

    Raises:
        PortInUse: another process listens on the port.
        LocalStackError: the address cannot be served on.
    """
    server = _quiet_server(host, port, wrap)
    thread = threading.Thread(target=server.serve_forever, name="jobkit-local-aws", daemon=True)
    thread.start()
    try:
        bound_host, bound_port = server.server_address[:2]
        yield f"http://{_url_host(str(bound_host))}:{bound_port}"
    finally:
        server.shutdown()
        thread.join()


def _quiet_server(host: str, port: int, wrap: Callable[[Any], Any] | None = None) -> BaseWSGIServer:
    """The server, its socket bound and listening (see the module's docstring)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server, select_address_family

    class QuietHandler(MotoRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            """Not a line per request: the local stack prints a line per job instead."""

    family = select_address_family(host, port)
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug: a port in TIME_WAIT is free
        listener.bind((host, port))
        listener.listen(128)
    except OSError as exc:
        listener.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(host, port) from None
        raise LocalStackError(f"cannot serve on {host} port {port}: {exc.strerror or exc}") from None
    except BaseException:
        listener.close()
        raise
    try:
        app = DomainDispatcherApplication(create_backend_app)
        app = wrap(app) if wrap is not None else app
        # werkzeug serves on a duplicate of the listening socket's descriptor.
        return make_server(host, port, app, threaded=True, request_handler=QuietHandler, fd=listener.fileno())
    finally:
        listener.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
