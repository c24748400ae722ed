"""A delivered job: what a fetch answers for each job, as a dataclass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class Job:
    """One delivery of a job. `lease` is this delivery's proof of ownership: only it acks,
    nacks or extends the job. `attempt` is 1 for the first delivery. `lease_expires_ms` is
    absolute (ms since the epoch): the server's deadline as fetched; after each extension by
    `Worker`, an estimate by this machine's clock (the extend answer carries no deadline).
    `group` is the group the job was pushed with (a tenant, a customer), None without one."""

    id: str
    payload: Any
    attempt: int
    lease: str
    lease_expires_ms: int
    priority: int
    group: str | None = None

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Job:
        return cls(
            id=str(obj["id"]),
            payload=obj.get("payload"),
            attempt=int(obj["attempt"]),
            lease=str(obj["lease"]),
            lease_expires_ms=int(obj["lease_expires_ms"]),
            priority=int(obj.get("priority", 0)),
            group=None if obj.get("group") is None else str(obj["group"]),
        )
