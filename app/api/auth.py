"""The proxy's own API keys (``--api-keys-file``), separate from the upstream's key.

The file is a JSON object ``{"<key>": "<tenant name>", ...}``.  Only blake2b digests of the
keys are kept in memory, and a key is never logged or echoed.  When no file is configured the
proxy is open, as before; either way sessions are scoped by a digest of the caller's key
(``app.service.callers``), so two keys never share session state.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
from fastapi import Request

from app.errors import AuthenticationError
from app.service.callers import api_key


class ApiKeys:
    """Digest of each accepted key -> its tenant's name."""

    def __init__(self, tenants: dict[bytes, str]) -> None:
        self._tenants = tenants

    @classmethod
    def from_file(cls, path: Path) -> ApiKeys:
        mapping = orjson.loads(path.read_bytes())
        if not isinstance(mapping, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in mapping.items()
        ):
            raise ValueError(f"{path}: expected a JSON object of API key -> tenant name")
        return cls({_digest(key): tenant for key, tenant in mapping.items()})

    def tenant(self, key: str | None) -> str | None:
        """The tenant owning ``key``, None for a missing or unknown key."""
        return None if key is None else self._tenants.get(_digest(key))


async def authenticate(request: Request) -> None:
    """Route dependency: 401 (in the route's client error format) without an accepted key;
    otherwise the key's tenant name is ``request.state.tenant`` (for telemetry labels)."""
    keys: ApiKeys | None = request.app.state.api_keys
    if keys is None:
        return
    tenant = keys.tenant(api_key(request.headers))
    if tenant is None:
        raise AuthenticationError(
            "missing or invalid API key: send 'Authorization: Bearer <key>' or 'x-api-key'"
        )
    request.state.tenant = tenant


def _digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode(), digest_size=32).digest()
