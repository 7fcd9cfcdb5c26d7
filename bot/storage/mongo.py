"""MongoDB through PyMongo's AsyncMongoClient: the source of truth for everything Mnemo learns.

`MongoStore` holds the client and one small class per collection: `store.memories`,
`store.accounts`, `store.rooms`, `store.facts`, `store.jobs` (the evaluation queue) and
`store.usage` (model use per world) and `store.leases` (which process holds what), each in its
own module beside this one; documents become models in `documents.py`. Plugins keep their own
data in their own collections
(`bot.plugin.services.Collections`).

Works against a real MongoDB and against the bundled nx-27017 server, whose gaps shape a few
choices in every collection module:

- ids are UUID strings, never ObjectId (nx matches ObjectIds only in `_id`);
- booleans and datetimes are always read back through the pydantic models, and datetimes are
  normalised to aware UTC on read: nx stores a `$set` boolean as 1 and a `$set` datetime on an
  existing document as a naive string, and a client without `tz_aware=True` returns naive
  datetimes. Filters never test a boolean or a `$set`-written datetime on the server;
- arrays are written whole on insert (nx's `$addToSet` ignores a missing field);
- projections name top-level fields only (nx flattens `{"a.b": 1}` into a key "a.b");
- aggregations stick to `$sort` + `$group` with `$first` (nx turns `$max` of dates into a
  string and `$match` on dates inside a pipeline matches nothing);
- no text indexes (nx fails creating one twice); searching is a regex over the text.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable, Sequence
from datetime import UTC
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from pymongo import AsyncMongoClient, IndexModel, monitoring
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import CollectionInvalid, OperationFailure, PyMongoError

from bot.storage.accounts import Accounts
from bot.storage.daily_spend import COLLECTION as DAILY_SPEND
from bot.storage.daily_spend import DailySpendStore
from bot.storage.facts import Facts
from bot.storage.jobs import JobStore
from bot.storage.leases import Leases
from bot.storage.memories import Memories
from bot.storage.model_usage import ModelUsage
from bot.storage.rejects import FactRejects
from bot.storage.rooms import Rooms
from bot.storage.window_reads import ANCHOR
from bot.storage.world_settings import COLLECTION as WORLD_SETTINGS
from bot.storage.world_settings import WorldSettingsStore

log = logging.getLogger(__name__)

_COLLECTIONS = (
    Memories,
    Accounts,
    Rooms,
    Facts,
    JobStore,
    ModelUsage,
    Leases,
    FactRejects,
    WorldSettingsStore,
    DailySpendStore,
)
# The collections Mnemo itself keeps (plugins keep theirs under `plugin_<name>_`).
CORE_COLLECTIONS = frozenset(
    {
        "memories",
        "accounts",
        "rooms",
        "facts",
        "evaluations",
        "model_usage",
        "fact_rejects",
        "leases",
        "rate_limits",
        WORLD_SETTINGS,
        DAILY_SPEND,
        ANCHOR,
    }
)


# Collections a window read starts from or joins (`$unionWith`: bot/storage/window_reads.py), maybe
# before anything was written to them: nx-27017 fails such a read on a collection that does
# not exist, where MongoDB returns nothing.
JOINED_COLLECTIONS = (
    "accounts",
    "rooms",
    "consent",
    "facts",
    "memories",
    WORLD_SETTINGS,
    ANCHOR,
)


def _indexes() -> dict[str, list[IndexModel]]:
    """Every index the collections' queries need, by collection name."""
    return {name: list(models) for kind in _COLLECTIONS for name, models in kind.INDEXES.items()}


class StorageUnavailable(RuntimeError):
    """The database cannot be reached (or refuses us). The message never holds a password."""


def redact_uri(uri: str) -> str:
    """The URI with its password replaced by `***`, fit for logs and error messages."""
    return re.sub(r"(?<=://)([^:/@]*):([^@/]*)@", r"\1:***@", uri)


class MongoStore:
    """The client, the database and its collections, each behind a small class.

    Give it a client created with `tz_aware=True` (as `from_uri` does); datetimes are normalised
    to aware UTC on read either way, so models always hold aware UTC datetimes.
    """

    def __init__(
        self,
        client: AsyncMongoClient,
        database: str,
        *,
        secrets: Iterable[str] = (),
        bundled: bool = False,
    ) -> None:
        self.client = client
        # Which server this is decides the advice an unreachable one gets: the operator's
        # MONGODB_URI, or the bundled server Mnemo runs itself.
        self._bundled = bundled
        self.db: AsyncDatabase = client[database]
        self.memories = Memories(self.db)
        self.accounts = Accounts(self.db)
        self.rooms = Rooms(self.db)
        self.facts = Facts(self.db)
        self.jobs = JobStore(self.db)
        self.usage = ModelUsage(self.db)
        # Claims not stored, counted by world and reason (bot/storage/rejects.py).
        self.rejects = FactRejects(self.db)
        self.leases = Leases(self.db)
        # What each world's admins chose: character and model names (/character, /model).
        self.worlds = WorldSettingsStore(self.db)
        # Today's model spend per world and person, for the daily caps (bot/llm/caps.py).
        self.spend = DailySpendStore(self.db)
        # Strings that must never reach an error message (the URI's password).
        self._secrets = tuple(secret for secret in secrets if secret)

    @classmethod
    def from_uri(
        cls,
        uri: str,
        database: str,
        *,
        server_selection_timeout_ms: int = 5000,
        app_name: str = "mnemo",
        event_listeners: Sequence[monitoring.CommandListener] = (),
        bundled: bool = False,
    ) -> MongoStore:
        """A store on its own client. The client connects lazily; call `ping()` to find out
        early whether the database is there. `event_listeners` are PyMongo monitoring
        listeners for this client (the cost benchmark counts its commands with one).
        `bundled`: the URI is the bundled server's, not the operator's MONGODB_URI."""
        # Any: pymongo takes its URI options as keyword arguments of their own types.
        defaults: dict[str, Any] = {
            "serverSelectionTimeoutMS": server_selection_timeout_ms,
            "connectTimeoutMS": min(server_selection_timeout_ms, 10_000),
            "appname": app_name,
        }
        # Options written in the URI win: a keyword argument would silently override them.
        given = {key.lower() for key in parse_qs(urlsplit(uri).query)}
        options = {key: value for key, value in defaults.items() if key.lower() not in given}
        client: AsyncMongoClient = AsyncMongoClient(
            uri, tz_aware=True, tzinfo=UTC, event_listeners=list(event_listeners), **options
        )
        return cls(client, database, secrets=_uri_secrets(uri), bundled=bundled)

    async def close(self) -> None:
        await self.client.close()

    async def ensure_indexes(self) -> None:
        """Create every index the queries below need, and the collections a window read
        joins; safe to call on every start-up."""
        for collection, indexes in _indexes().items():
            await self.db[collection].create_indexes(indexes)
        existing = set(await self.db.list_collection_names())
        for name in JOINED_COLLECTIONS:
            if name not in existing:
                with contextlib.suppress(CollectionInvalid, OperationFailure):  # another process
                    await self.db.create_collection(name)

    async def ping(self) -> None:
        """Round-trip to the server; raises StorageUnavailable (within the client's server
        selection time-out) instead of hanging when the database is down or refuses us."""
        try:
            await self.client.admin.command("ping")
        except PyMongoError as error:
            where = ", ".join(sorted(f"{host}:{port}" for host, port in self._addresses())) or "?"
            # PyMongo's own line (a topology description, timeouts) is for a debugger; the
            # operator gets what went wrong in a few words and what to do about it.
            detail = self._scrub(f"{type(error).__name__}: {error}")
            log.debug("MongoDB ping failed: %s", detail)
            reason, hint = unreachable_advice(error, bundled=self._bundled)
            raise StorageUnavailable(
                f"MongoDB at {where} is unavailable: {reason}. {hint}"
            ) from None

    def _addresses(self) -> list[tuple[str, int | None]]:
        try:
            return list(self.client.topology_description.server_descriptions())
        except Exception:  # a description is a courtesy in an error message, never a new error
            return []

    def _scrub(self, text: str) -> str:
        """Remove the URI's password from a message, in whatever encoding it appears."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return redact_uri(text)


# What PyMongo's socket errors say, by cause (Linux, macOS and Windows wordings).
_UNKNOWN_HOST = re.compile(
    r"Name or service not known|nodename nor servname|Temporary failure in name resolution"
    r"|getaddrinfo failed|No address associated|Errno -[235]\b",
    re.IGNORECASE,
)
_REFUSED = re.compile(r"Connection refused|Connect call failed|Errno 111\b|WinError 10061")
_TIMED_OUT = re.compile(r"timed out|timeout", re.IGNORECASE)
_AUTH_FAILED = 18  # MongoDB's AuthenticationFailed


def unreachable_advice(error: PyMongoError, *, bundled: bool) -> tuple[str, str]:
    """Why a ping failed, in a few words, and what the operator can do about it."""
    if isinstance(error, OperationFailure):
        if error.code == _AUTH_FAILED:
            return (
                "it refused the user name or password",
                "Check the credentials in MONGODB_URI (and authSource, if the user lives in "
                "another database).",
            )
        return (
            f"it refused the command ({(error.details or {}).get('codeName') or error.code})",
            "Check that the MONGODB_URI user may read and write its database.",
        )
    text = str(error)
    if _UNKNOWN_HOST.search(text):
        reason = "the host name is not known"
    elif _REFUSED.search(text):
        reason = "nothing accepts connections there"
    elif _TIMED_OUT.search(text):
        reason = "no answer in time"
    else:
        reason = f"the connection failed ({type(error).__name__})"
    if bundled:
        hint = (
            "The bundled server stopped answering: its log is nx-27017.log in MNEMO_DATA_DIR/mongo."
        )
    else:
        hint = (
            "Check the host and port in MONGODB_URI and that the server is running and "
            "reachable from here, or unset MONGODB_URI to use the bundled server."
        )
    return reason, hint


def _uri_secrets(uri: str) -> set[str]:
    try:
        password = urlsplit(uri).password
    except ValueError:
        return set()
    return {password, unquote(password), quote(unquote(password), safe="")} if password else set()
