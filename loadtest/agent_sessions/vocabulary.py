"""Word, prose and symbol pools that generated text is drawn from.

The word lists and sentences live as data files under ``pools/`` (see ``pool_files``); the
emoji and odd spaces stay here, spelled as escapes, as they are invisible or composed.
"""

from __future__ import annotations

import unicodedata

from .pool_files import lines

NOUNS = lines("words/nouns.txt")
VERBS = lines("words/verbs.txt")
ADJS = lines("words/adjectives.txt")
USERS = lines("words/user_names.txt")
FULLNAMES = lines("words/full_names.txt")
PROJECT_PREFIXES = lines("words/project_prefixes.txt")
PROJECT_SUFFIXES = lines("words/project_suffixes.txt")
PY_STDLIB = lines("words/python_stdlib.txt")
SPECIAL_LOOKALIKES = lines("words/special_token_lookalikes.txt")

# English sentence templates; fields: noun, noun2, adj, verb, n, ident, pct.
SENTENCES = lines("prose/sentences.txt")

# Multilingual sentences, in draw order.  Vietnamese is stored precomposed (NFC) and used
# decomposed (NFD), so its tone marks become combining characters.
_LANGUAGES = ("zh", "ja", "ko", "ru", "ar", "he", "hi", "vi", "th", "el", "de_fr_es")
_DECOMPOSED = frozenset({"vi"})


def _foreign_pool() -> tuple[str, ...]:
    pool: list[str] = []
    for lang in _LANGUAGES:
        sentences = lines(f"multilingual/{lang}.txt")
        if lang in _DECOMPOSED:
            sentences = tuple(unicodedata.normalize("NFD", s) for s in sentences)
        pool += sentences
    return tuple(pool)


FOREIGN = _foreign_pool()

EMOJI = (
    "\U0001f680",
    "\u2705",
    "\u274c",
    "\U0001f525",
    "\U0001f41b",
    "\U0001f469\u200d\U0001f4bb",  # woman technologist
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",  # family
    "\U0001f44d\U0001f3fd",  # thumbs up, medium skin tone
    "\U0001f9d1\U0001f3ff\u200d\U0001f680",  # astronaut, dark skin tone
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # rainbow flag
    "\u2764\ufe0f",
    "\U0001f1ef\U0001f1f5",
    "\U0001f1fa\U0001f1e6",
    "\U0001f926\U0001f3fb\u200d\u2642\ufe0f",  # facepalm, light skin tone, male
    "1\ufe0f\u20e3",
    "\U0001f647\u200d\u2640\ufe0f",
    "\U0001f605",
    "\U0001f389",
    "\u26a0\ufe0f",
    "\U0001f44b\U0001f3fc",
    "\U0001f9ea",
    "\U0001f4e6",
    "\U0001f9d1\U0001f3fe\u200d\U0001f91d\u200d\U0001f9d1\U0001f3fb",  # people holding hands
)
ODD_SPACES = ("\u00a0", "\u200b", "\u3000", "\u2009", "\u202f")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
