"""What handlers are given: `ctx: Ctx` resolves, by name, the app's Services (wired in
app.py); a handler reads the typed fields it needs."""

from litestar.di import NamedDependency

from services.runtime.context import Services

Ctx = NamedDependency[Services]
