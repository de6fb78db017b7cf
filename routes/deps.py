"""What handlers are given: `ctx: Ctx` resolves the app's context by name (wired in app.py)."""

from litestar.di import NamedDependency

from services.context import AppContext

Ctx = NamedDependency[AppContext]
