"""The endpoint policy for servers' and players' own models: refused address classes, names
that resolve to them, redirects to them, and the operator's switch for self-hosters.

The fake model server listens on 127.0.0.1, which the rule refuses; a test that needs it names
that one address trusted and keeps the rule real for every other address."""

from __future__ import annotations

import ipaddress

import pytest

from engine.llm.providers.base import ChatMessage, GenerationParams
from engine.llm.providers.endpoint_policy import EndpointPolicy, EndpointRefused, refusal_reason
from engine.llm.providers.openai_compat import OpenAICompatibleProvider
from tests.fakes.openai_server import FakeModelServer
from tests.fakes.static_server import static_server

LOCAL = ipaddress.ip_address("127.0.0.1")
MESSAGES = [ChatMessage("user", "look around")]
PARAMS = GenerationParams(max_tokens=40)

#: One literal of every refused class, IPv4 and IPv6, with a word its reason must carry.
REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("::1", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.5", "private"),
    ("192.168.1.1", "private"),
    ("fd00::1", "private"),
    ("169.254.169.254", "link-local"),
    ("fe80::1", "link-local"),
    ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"),
    ("240.0.0.1", "reserved"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("::ffff:169.254.169.254", "IPv4-mapped"),
    ("::ffff:8.8.8.8", "IPv4-mapped"),
    # Ranges ipaddress calls global: 6to4 wrapping loopback and link-local, its relays, and
    # deprecated site-local IPv6.
    ("2002:7f00:1::", "6to4"),
    ("2002:a9fe:a9fe::", "6to4"),
    ("192.88.99.1", "6to4 relay"),
    ("fec0::1", "site-local"),
    ("64:ff9b::7f00:1", "reserved"),
]


@pytest.mark.parametrize(("address", "word"), REFUSED)
def test_every_refused_class_is_named(address: str, word: str) -> None:
    assert word in (refusal_reason(ipaddress.ip_address(address)) or "")


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert refusal_reason(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(("address", "word"), REFUSED)
async def test_a_url_naming_a_refused_literal_is_refused(address: str, word: str) -> None:
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(EndpointRefused, match=word):
        await EndpointPolicy().check(f"https://{host}/v1")


async def test_the_metadata_service_is_refused_with_the_reason() -> None:
    with pytest.raises(EndpointRefused) as refused:
        await EndpointPolicy().check("http://169.254.169.254/v1")
    assert "169.254.169.254" in str(refused.value)
    assert "cloud metadata" in str(refused.value)


async def test_a_name_resolving_to_loopback_is_refused() -> None:
    # The system's own resolver: localhost resolves to a loopback address everywhere.
    with pytest.raises(EndpointRefused, match=r"localhost resolves to .*loopback"):
        await EndpointPolicy().check("http://localhost:11434/v1")


async def test_a_trusted_host_name_is_allowed_and_nothing_else_on_its_network() -> None:
    """CAMPFIRE_TRUSTED_ENDPOINT_HOSTS: the companion the operator named, by its name only."""

    async def companion(host: str, port: int) -> list[str]:
        return ["172.18.0.5"] if host in ("ollama", "postgres") else ["8.8.8.8"]

    policy = EndpointPolicy(resolve=companion, trusted_hosts=frozenset({"ollama"}))
    await policy.check("http://ollama:11434/v1")
    await policy.check("http://OLLAMA:11434/v1")
    for refused in ("http://postgres:5432/v1", "http://172.18.0.5:11434/v1"):
        with pytest.raises(EndpointRefused, match="private"):
            await policy.check(refused)


async def test_a_name_with_one_refused_address_among_public_ones_is_refused() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.0.0.7"]

    with pytest.raises(EndpointRefused, match="10.0.0.7, a private"):
        await EndpointPolicy(resolve=resolve).check("https://models.example/v1")


@pytest.mark.parametrize("url", ["ftp://example.com/v1", "file:///etc/passwd", "example.com"])
async def test_only_http_and_https(url: str) -> None:
    with pytest.raises(EndpointRefused, match="Only http"):
        await EndpointPolicy().check(url)


async def test_credentials_in_the_url_are_refused() -> None:
    with pytest.raises(EndpointRefused, match="key option"):
        await EndpointPolicy().check("https://user:hunter2@example.com/v1")


async def test_allowing_private_endpoints_lets_a_local_one_through(
    fake_model: FakeModelServer,
) -> None:
    await EndpointPolicy(allow_private=True).check(fake_model.base_url)
    provider = OpenAICompatibleProvider(
        fake_model.base_url, fake_model.model, policy=EndpointPolicy(allow_private=True)
    )
    try:
        fake_model.queue("The lantern flickers.")
        chunks = [chunk async for chunk in provider.stream(MESSAGES, PARAMS)]
        assert "The lantern flickers." in "".join(getattr(c, "text", "") for c in chunks)
    finally:
        await provider.aclose()


async def test_every_request_is_checked_not_only_the_saved_url(
    fake_model: FakeModelServer,
) -> None:
    """A provider with the real rule refuses the local fake server at connection time,
    whatever was checked when the URL was saved; nothing reaches the server."""
    policy = EndpointPolicy()
    provider = OpenAICompatibleProvider(fake_model.base_url, fake_model.model, policy=policy)
    try:
        with pytest.raises(EndpointRefused, match="loopback"):
            async for _ in provider.stream(MESSAGES, PARAMS):
                pass
    finally:
        await provider.aclose()
    assert fake_model.requests == []


async def test_a_trusted_fake_server_is_reached(fake_model: FakeModelServer) -> None:
    policy = EndpointPolicy(trusted=frozenset({LOCAL}))
    provider = OpenAICompatibleProvider(fake_model.base_url, fake_model.model, policy=policy)
    try:
        fake_model.queue("Rain on the roof.")
        chunks = [chunk async for chunk in provider.stream(MESSAGES, PARAMS)]
        assert "Rain on the roof." in "".join(getattr(c, "text", "") for c in chunks)
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/v1/chat/completions",
        "http://[::1]:8080/v1/chat/completions",
        "http://[::ffff:127.0.0.1]/v1/chat/completions",
    ],
)
async def test_a_redirect_to_a_refused_address_is_refused(target: str) -> None:
    """The allowed server answers with a redirect; the next hop is checked like the first."""
    policy = EndpointPolicy(trusted=frozenset({LOCAL}))
    with static_server(307, "text/plain", b"", headers={"Location": target}) as url:
        await policy.check(url)  # the saved URL itself passes
        provider = OpenAICompatibleProvider(url, "fake", policy=policy)
        try:
            with pytest.raises(EndpointRefused, match="will not connect"):
                async for _ in provider.stream(MESSAGES, PARAMS):
                    pass
        finally:
            await provider.aclose()


async def test_a_redirect_to_a_name_resolving_to_a_refused_address_is_refused() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return {"metadata.example": ["169.254.169.254"]}[host]

    policy = EndpointPolicy(resolve=resolve, trusted=frozenset({LOCAL}))
    target = "http://metadata.example/latest/meta-data/"
    with static_server(308, "text/plain", b"", headers={"Location": target}) as url:
        provider = OpenAICompatibleProvider(url, "fake", policy=policy)
        try:
            with pytest.raises(EndpointRefused, match="metadata.example resolves to 169.254"):
                async for _ in provider.stream(MESSAGES, PARAMS):
                    pass
        finally:
            await provider.aclose()


async def test_the_connection_goes_to_the_checked_address() -> None:
    """DNS rebinding: the name is resolved once, by the policy, and the connection is made to
    that answer, so a second, different answer cannot be slipped in between."""
    answers = iter([["127.0.0.1"], ["10.9.9.9"]])
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return next(answers)

    policy = EndpointPolicy(resolve=resolve, trusted=frozenset({LOCAL}))
    with FakeModelServer() as fake:
        port = fake.base_url.rsplit(":", 1)[1].split("/", 1)[0]
        suffix = fake.base_url.split(f":{port}", 1)[1]
        provider = OpenAICompatibleProvider(
            f"http://models.example:{port}{suffix}", fake.model, policy=policy
        )
        try:
            fake.queue("A door creaks.")
            chunks = [chunk async for chunk in provider.stream(MESSAGES, PARAMS)]
        finally:
            await provider.aclose()
    assert "A door creaks." in "".join(getattr(c, "text", "") for c in chunks)
    assert asked == ["models.example"]
