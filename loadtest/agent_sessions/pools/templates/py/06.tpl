_«K1»_RE = re.compile(
    r"(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)\s*[:=]\s*(?P<value>.+?)\s*(?:#.*)?$", re.MULTILINE
)
«K2»: Final[dict[str, tuple[int, float]]] = {
    "«w1»":      («x1», «fl1»),   # «cm1»
    "«w2»":      («x2», «fl2»),
    "«w3»":      («x3», «fl3»),   # TODO(«user»): «cm2»
    "«w4»_«w1»": («n1», «fl4»),
}
«K3» = 0x«h1»
«K4» = «n2»


