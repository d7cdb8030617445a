def «id1»(«w1»s: Sequence[int], *, «id2»: int = «x1») -> dict[str, int]:
    # «cm1»
    out: dict[str, int] = {}
    for i, «w1» in enumerate(«w1»s):
        if «w1» % «id2» == 0:
            continue
        elif «w1» > «n1»:
            out[f"«w1»_{i}"] = «w1» >> 3
        else:
            try:
                out[str(«w1»)] = «id3»(«w1»)
            except (KeyError, ValueError) as exc:  # noqa: PERF203
                log.warning("skipping %r: %s", «w1», exc)
    return out


