"""A MongoDB that cannot be reached is reported in a few words with what to do about it, not
as PyMongo's long line of topology and time-outs."""

from __future__ import annotations

import socket

import pytest
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError

from bot.storage.mongo import MongoStore, StorageUnavailable, unreachable_advice


def closed_port() -> int:
    """A local port nothing listens on: bound once to learn a free number, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_refused_connection_says_where_and_what_to_do() -> None:
    port = closed_port()
    uri = f"mongodb://mnemo:hunter2secret@127.0.0.1:{port}/"
    store = MongoStore.from_uri(uri, "mnemo", server_selection_timeout_ms=300)
    try:
        with pytest.raises(StorageUnavailable) as raised:
            await store.ping()
    finally:
        await store.close()
    message = str(raised.value)
    assert message == (
        f"MongoDB at 127.0.0.1:{port} is unavailable: nothing accepts connections there. "
        "Check the host and port in MONGODB_URI and that the server is running and reachable "
        "from here, or unset MONGODB_URI to use the bundled server."
    )
    assert "hunter2secret" not in message


async def test_the_bundled_server_is_not_sent_to_mongodb_uri() -> None:
    store = MongoStore.from_uri(
        f"mongodb://127.0.0.1:{closed_port()}/",
        "mnemo",
        server_selection_timeout_ms=300,
        bundled=True,
    )
    try:
        with pytest.raises(StorageUnavailable) as raised:
            await store.ping()
    finally:
        await store.close()
    assert "MONGODB_URI" not in str(raised.value)
    assert "nx-27017.log" in str(raised.value)


def test_an_unknown_host_name_is_named_as_such() -> None:
    # PyMongo's wording for a name the resolver does not know (no lookup is made here).
    error = ServerSelectionTimeoutError(
        "nowhere.invalid:27017: [Errno -2] Name or service not known (configured timeouts: "
        "socketTimeoutMS: 5000.0ms, connectTimeoutMS: 5000.0ms), Timeout: 5.0s, Topology ..."
    )
    reason, hint = unreachable_advice(error, bundled=False)
    assert reason == "the host name is not known"
    assert "unset MONGODB_URI to use the bundled server" in hint


def test_refused_credentials_point_at_the_uri_credentials() -> None:
    error = OperationFailure("Authentication failed.", code=18)
    reason, hint = unreachable_advice(error, bundled=False)
    assert reason == "it refused the user name or password"
    assert "credentials in MONGODB_URI" in hint
