"""The error type every layer raises for a request that cannot be served."""

from storage.db import DiskFull  # noqa: F401 - raised by storage, answered 503 at the edge


class PlainError(Exception):
    """Answered as `text/plain` with `status`; `newline` mimics Go's http.Error (push path)."""

    def __init__(self, status: int, message: str, *, newline: bool = False):
        super().__init__(message)
        self.status = status
        self.message = message
        self.newline = newline


class JSONError(Exception):
    """Answered as Prometheus' API error body: {"status": "error", "errorType", "error"}."""

    def __init__(self, status: int, error_type: str, message: str):
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message
