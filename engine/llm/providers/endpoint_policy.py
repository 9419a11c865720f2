"""Which model endpoints a server or a player may point Campfire at, checked by address.

A model URL someone types is a request Campfire's machine will make: pointed at the loopback,
the operator's private network or a cloud's metadata service (169.254.169.254), it would turn
the bot into a way in. So an endpoint is checked when it is saved and again on every connection
Campfire opens to it, by the addresses its name resolves to, not by its name: a name is free to
resolve anywhere.

DNS rebinding (a name that resolves to a public address when checked and to a private one when
connected) is closed by connecting to the very address that was checked: ``GuardedTransport``
resolves the name itself, checks each address, and hands the connection the checked address;
TLS still verifies the certificate against the name (httpcore sends the URL's host as the
server name), with the system's trust store and no way to turn verification off. Redirects are
followed by the client, and each hop opens its connection through the same transport, so every
hop is checked the same way. No proxy from the environment is used: a proxy would connect on
the bot's behalf, past the check.

The operator's own endpoint (``CAMPFIRE_MODEL_URL``) is never checked: where it runs is the
operator's choice. ``CAMPFIRE_TRUSTED_ENDPOINT_HOSTS`` names the hosts (a companion model server)
players may use although they are private; ``CAMPFIRE_ALLOW_PRIVATE_ENDPOINTS`` lets a
self-hoster's players use every local address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpcore
import httpx

from engine.errors import ModelError
from engine.llm.providers.tls import system_tls

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: Resolves a host name and port to the addresses a connection could go to.
Resolver = Callable[[str, int], Awaitable[list[str]]]

#: Carrier-grade NAT (RFC 6598): a provider's private space, not the internet.
CGNAT = ipaddress.ip_network("100.64.0.0/10")

#: Ranges ``ipaddress`` calls global that lead elsewhere: 6to4 (RFC 3056) wraps any IPv4
#: address, loopback and link-local included, and its relays' anycast prefix (RFC 3068) hands
#: traffic on; both are deprecated (RFC 7526). Site-local IPv6 (RFC 3879, deprecated) is a
#: private network.
TUNNELS_AND_SITE_LOCAL = {
    ipaddress.ip_network("2002::/16"): "a 6to4 address (it wraps an IPv4 address)",
    ipaddress.ip_network("192.88.99.0/24"): "a 6to4 relay address",
    ipaddress.ip_network("fec0::/10"): "a site-local address (a private network)",
}


class EndpointRefused(ModelError):
    """An endpoint a server or player chose points somewhere Campfire will not connect to."""

    retryable = False


def refusal_reason(address: IPAddress) -> str | None:
    """Why Campfire will not connect to ``address`` for a player's model; None when it may.

    The order matters only for the words: the most specific class is named (169.254.0.0/16 is
    also "private" to ``ipaddress``, but "link-local" says why it is dangerous).
    """
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return "an IPv4-mapped IPv6 address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address (this machine)"
    if address.is_link_local:
        return "a link-local address (where cloud metadata services answer)"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in CGNAT:
        return "a carrier-grade NAT address (100.64.0.0/10)"
    for network, reason in TUNNELS_AND_SITE_LOCAL.items():
        if address.version == network.version and address in network:
            return reason
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return "a private network address"
    if not address.is_global:
        return "an address that is not on the public internet"
    return None


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the system's resolver gives for ``host``."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise EndpointRefused(
            f"The model server's name {host} could not be resolved; check the URL."
        ) from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True, slots=True)
class EndpointPolicy:
    """The rule for endpoints servers and players choose.

    ``resolve`` and ``trusted`` are for tests: a fake model server listens on 127.0.0.1, which
    the real rule refuses, so a test names that one address as if it were public and keeps the
    rule real for every other.
    """

    allow_private: bool = False
    resolve: Resolver = system_resolve
    trusted: frozenset[IPAddress] = field(default_factory=frozenset)
    #: Host names the operator allows whatever they resolve to (``CAMPFIRE_TRUSTED_ENDPOINT_
    #: HOSTS``: a companion model server on the bot's private network), by exact name, lower
    #: case. Every other name and address is checked.
    trusted_hosts: frozenset[str] = field(default_factory=frozenset)

    def check_url(self, url: str) -> tuple[str, int]:
        """The URL's host and port, once its form is acceptable: http or https, a host."""
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError:
            raise EndpointRefused("That is not a URL Campfire can read.") from None
        if parts.scheme not in ("http", "https"):
            raise EndpointRefused(
                "Only http:// and https:// model URLs are allowed "
                f"(got {parts.scheme or 'no scheme'}://)."
            )
        if not parts.hostname:
            raise EndpointRefused("The model URL has no host name.")
        if parts.username is not None or parts.password is not None:
            raise EndpointRefused(
                "Put the API key in the key option, not in the URL: a URL is shown again, a key "
                "never is."
            )
        return parts.hostname, port or (443 if parts.scheme == "https" else 80)

    def address_refusal(self, host: str, address: str) -> str | None:
        """Why the connection to ``address`` (``host``'s) is refused; None when it may go."""
        try:
            parsed = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return f"{host} resolved to something that is not an address ({address})"
        if self.allow_private or parsed in self.trusted:
            return None
        if host.strip("[]").lower() in self.trusted_hosts:
            return None
        reason = refusal_reason(parsed)
        if reason is None:
            return None
        named = address if host.strip("[]") == address else f"{host} resolves to {address}"
        return f"{named}, {reason}"

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses ``host`` resolves to, all of them allowed; else ``EndpointRefused``.

        Every address must pass, not just one: the connection may go to any of them.
        """
        bare = host.strip("[]")
        try:
            found = [str(ipaddress.ip_address(bare.split("%", 1)[0]))]
        except ValueError:
            found = await self.resolve(bare, port)
        if not found:
            raise EndpointRefused(f"The model server's name {host} resolves to no address.")
        for address in found:
            if (why := self.address_refusal(host, address)) is not None:
                raise EndpointRefused(
                    f"Campfire will not connect to that model server: {why}. Only public "
                    "addresses are allowed for a server's or player's own model."
                )
        return found

    async def check(self, url: str) -> None:
        """The check made when an endpoint is saved (and by ``/model test``)."""
        host, port = self.check_url(url)
        await self.addresses(host, port)


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Opens each TCP connection to an address the policy has just checked."""

    def __init__(self, policy: EndpointPolicy) -> None:
        self._policy = policy
        # anyio is installed with httpx; httpcore declares a stand-in class when it is not.
        self._backend: httpcore.AsyncNetworkBackend = httpcore.AnyIOBackend()  # type: ignore[assignment]

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._policy.addresses(host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._backend.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                last = error
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise EndpointRefused("Model servers are reached over the network only.")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport whose every connection goes through ``EndpointPolicy``."""

    def __init__(self, policy: EndpointPolicy) -> None:
        # No environment proxies (trust_env False): they would connect past the check.
        # The system's trust store, verification always on: a server cannot turn it off.
        super().__init__(trust_env=False, verify=system_tls())
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=system_tls(),
            network_backend=_GuardedBackend(policy),
        )


#: How many redirects a player's model server may send a request through, each hop checked.
MAX_REDIRECTS = 3


def guarded_client(
    policy: EndpointPolicy, *, headers: dict[str, str], timeout: httpx.Timeout
) -> httpx.AsyncClient:
    """An HTTP client for a server's or player's model: every hop checked by ``policy``."""
    return httpx.AsyncClient(
        headers=headers,
        timeout=timeout,
        transport=GuardedTransport(policy),
        follow_redirects=True,
        max_redirects=MAX_REDIRECTS,
        trust_env=False,
    )
