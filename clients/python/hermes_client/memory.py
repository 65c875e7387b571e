"""A user's long-term memory: recall, write, forget and list (`hermes.memory.*`, answered by
the memory-extractor)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from . import subjects
from .connection import Connection
from .envelope import Envelope

KINDS = ("preference", "fact", "constraint", "event")


@dataclass
class Memory:
    id: str
    kind: str
    key: str
    content: str
    importance: float
    namespace: str
    record: dict


@dataclass
class Recalled:
    memory: Memory
    score: float


def _memory(record: dict) -> Memory:
    return Memory(record.get("id", ""), record.get("kind", ""), record.get("key", ""),
                  record.get("content", ""), record.get("importance", 0.0),
                  record.get("namespace", "default"), record)


class MemoryClient:
    """The memories of one user."""

    def __init__(self, conn: Connection, user: str, namespace: str = "default",
                 timeout: float = 10.0):
        self.conn = conn
        self.user = subjects.check_id("user", user)
        self.namespace = namespace
        self.timeout = timeout

    async def _ask(self, subject: str, kind: str, body: dict, reply_kind: str) -> dict:
        envelope = Envelope(kind, body, user=self.user)
        reply = await self.conn.request(subject, envelope, self.timeout)
        return reply.expect(reply_kind)

    async def recall(self, query: str, limit: int = 5) -> List[Recalled]:
        """The user's memories most relevant to `query` (filter → BM25 + vectors → rerank)."""
        body = {"user": self.user, "query": query, "limit": limit,
                "namespaces": [self.namespace]}
        reply = await self._ask(subjects.MEMORY_RECALL, "memory.recall", body,
                                "memory.recalled")
        return [Recalled(_memory(hit["record"]), hit["score"]) for hit in reply["hits"]]

    async def write(self, key: str, content: str, kind: str = "fact",
                    importance: float = 0.5, expiry_days: Optional[int] = None,
                    source: str = "hermes-client") -> list:
        """Remember `content` under `key` (merged like extracted memories: a newer value for
        the same key replaces the older). Returns the changes made."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        update = {"op": "add", "kind": kind, "key": key, "content": content,
                  "importance": importance}
        if expiry_days is not None:
            update["expiry_days"] = expiry_days
        body = {"user": self.user, "namespace": self.namespace, "update": update,
                "source": source}
        reply = await self._ask(subjects.MEMORY_WRITE, "memory.write", body, "memory.written")
        return reply["changes"]

    async def forget(self, key: Optional[str] = None, id: Optional[str] = None) -> list:
        """Forget the memory under `key` (or with record `id`). Returns the changes made."""
        if (key is None) == (id is None):
            raise ValueError("name exactly one of key= or id=")
        body = {"user": self.user, "namespace": self.namespace}
        body.update({"key": key} if key is not None else {"id": id})
        reply = await self._ask(subjects.MEMORY_FORGET, "memory.forget", body,
                                "memory.written")
        return reply["changes"]

    async def list(self, limit: int = 50) -> List[Memory]:
        """The user's live memories, newest first."""
        body = {"user": self.user, "namespace": self.namespace, "limit": limit}
        reply = await self._ask(subjects.MEMORY_LIST, "memory.list", body, "memory.listed")
        return [_memory(r) for r in reply["records"]]
