"""Thin HTTP routers, one per client API: parse, call the service, answer JSON or SSE."""
