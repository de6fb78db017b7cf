"""Service lifecycle states as Loki's /services and /ready report them, and the hooks that
tie a background service to the app's lifespan."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Awaitable, Callable


class State(str, enum.Enum):
    NEW = "New"
    STARTING = "Starting"
    RUNNING = "Running"
    STOPPING = "Stopping"
    TERMINATED = "Terminated"
    FAILED = "Failed"


class Service:
    def __init__(self, name: str):
        self.name = name
        self.state = State.NEW
        self.failure: str | None = None

    def set(self, state: State, failure: str | None = None) -> None:
        self.state = state
        if failure is not None:
            self.failure = failure


class ServiceRegistry:
    def __init__(self, names: list[str]):
        self.services = {name: Service(name) for name in names}
        self.stopping = False

    def __getitem__(self, name: str) -> Service:
        return self.services[name]

    def set_all(self, state: State) -> None:
        for service in self.services.values():
            service.set(state)

    def not_running(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for service in self.services.values():
            if service.state is not State.RUNNING:
                counts[service.state.value] = counts.get(service.state.value, 0) + 1
        return counts


@dataclass(frozen=True)
class Lifecycle:
    """One service's part in the app's lifespan: `start` once the database is open, `stop`
    before it closes (either may be absent)."""
    start: Callable[[], Awaitable[None]] | None = None
    stop: Callable[[], Awaitable[None]] | None = None


async def cancel_task(task: "asyncio.Task | None") -> None:
    """Cancel a service's loop and wait until it has ended."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
