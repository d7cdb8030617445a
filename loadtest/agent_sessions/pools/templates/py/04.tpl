async def «id1»(client: «C1», «w1»_ids: list[str], *, timeout: float = «fl1») -> list[bytes]:
    """«doc1»"""
    sem = asyncio.Semaphore(«x1»)

    async def one(«w1»_id: str) -> bytes:
        async with sem, client.stream("GET", f"/v1/«w1»s/{«w1»_id}") as resp:
            resp.raise_for_status()
            return b"".join([chunk async for chunk in resp.aiter_bytes()])

    results = await asyncio.wait_for(
        asyncio.gather(*(one(i) for i in «w1»_ids), return_exceptions=True),
        timeout=timeout,
    )
    return [r for r in results if isinstance(r, bytes)]


