"""Brute-force protection for HTTP Basic logins on the Grafana API, as Grafana does it.

Grafana blocks a login after `brute_force_login_protection_max_attempts` (5) failed
attempts within five minutes, the right password included, until the oldest attempt ages
out; a success clears the login's record. logstore does the same per login and, with ten
times the allowance, per client address, so one address cannot try many logins either.
Attempts are kept in memory (bounded): a restart forgets them, which costs an attacker a
restart they cannot cause.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from typing import Callable

WINDOW_SECONDS = 300.0
ADDRESS_FACTOR = 10
MAX_TRACKED = 100_000   # logins and addresses remembered at once; the oldest go first
BLOCKED_TEXT = ("too many consecutive incorrect login attempts for user - login for user "
                "temporarily blocked")


class LoginAttempts:
    def __init__(self, max_attempts: int = 5, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic):
        self.max_attempts = max_attempts
        self.enabled = enabled and max_attempts > 0
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()
        self.blocked_total = 0

    def _recent(self, key: str, now: float) -> int:
        times = self._failures.get(key)
        if not times:
            return 0
        while times and times[0] <= now - WINDOW_SECONDS:
            times.popleft()
        if not times:
            del self._failures[key]
            return 0
        return len(times)

    def blocked(self, login: str, address: str) -> bool:
        """Whether a login attempt is refused before its password is checked."""
        if not self.enabled:
            return False
        now = self.clock()
        with self._lock:
            over = (self._recent("u:" + login.lower(), now) >= self.max_attempts or
                    self._recent("a:" + address, now) >= self.max_attempts * ADDRESS_FACTOR)
        if over:
            self.blocked_total += 1
        return over

    def failed(self, login: str, address: str) -> None:
        if not self.enabled:
            return
        now = self.clock()
        with self._lock:
            for key in ("u:" + login.lower(), "a:" + address):
                times = self._failures.get(key)
                if times is None:
                    if len(self._failures) >= MAX_TRACKED:
                        self._failures.popitem(last=False)
                    times = self._failures[key] = deque()
                else:
                    self._failures.move_to_end(key)
                times.append(now)
                while len(times) > self.max_attempts * ADDRESS_FACTOR:
                    times.popleft()

    def succeeded(self, login: str) -> None:
        with self._lock:
            self._failures.pop("u:" + login.lower(), None)
