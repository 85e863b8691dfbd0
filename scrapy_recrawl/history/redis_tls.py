"""``rediss://``: a TLS connection whose handshake is bounded and said for what it is.

redis-py does the TLS handshake after the TCP connect, under the *read* timeout
(scrapy-redis's default ``socket_timeout`` is 30 s) and retries it: a ``rediss://``
URL naming a plain Redis (which reads the ClientHello as the start of a command and
waits for the rest) took 62 s to fail with "Timeout connecting to server". Here the
handshake is part of connecting: bounded by ``socket_connect_timeout`` and at most
:data:`HANDSHAKE_SECONDS` (a handshake takes milliseconds, even across an ocean; one
not done in 10 s will not be), and a handshake that times out is not retried: the
error says what probably happened (a plain Redis behind a ``rediss://`` URL) in one
line. Imported only for a TLS connection (redis-py is the ``redis`` extra's).
"""

from __future__ import annotations

from typing import Any

from redis.connection import SSLConnection
from redis.exceptions import RedisError

#: the longest a TLS handshake is waited for (seconds)
HANDSHAKE_SECONDS = 10.0


class TlsHandshakeError(RedisError):
    """No TLS handshake from the server in time: not retried (redis-py retries only
    connection and timeout errors), raised at once with the address named."""


class BoundedTlsConnection(SSLConnection):
    """redis-py's SSLConnection with its handshake bounded (module docstring)."""

    def _wrap_socket_with_ssl(self, sock: Any) -> Any:
        bound = HANDSHAKE_SECONDS
        if self.socket_connect_timeout:
            bound = min(bound, float(self.socket_connect_timeout))
        sock.settimeout(bound)
        try:
            wrapped = super()._wrap_socket_with_ssl(sock)
        except TimeoutError:  # socket.timeout
            raise TlsHandshakeError(
                f"no TLS handshake from {self.host}:{self.port} within {bound:g} s: is it a "
                "Redis without TLS? Name it redis://, not rediss://"
            ) from None
        wrapped.settimeout(self.socket_timeout)
        return wrapped


def is_tls(connection_class: Any) -> bool:
    """Whether connections of ``connection_class`` speak TLS (a ``rediss://`` URL)."""
    return isinstance(connection_class, type) and issubclass(connection_class, SSLConnection)
