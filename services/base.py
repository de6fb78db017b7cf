"""Service lifecycle states as Loki's /services and /ready report them."""

from __future__ import annotations

import enum


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
