"""Runtime: the app context, service states, tenant limits, metrics, memory."""
