"""The real Alertmanager of the ruler's tests, for the nodes of a cluster to send to."""

from tests.ruler.conftest import alertmanager  # noqa: F401 - a fixture, used by name
