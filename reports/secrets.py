"""Keeping secrets out of a bundle that is meant to be pasted into a public issue.

Two rules. Environment variables enter a bundle only by name from `ENV_ALLOWLIST`, never by
pattern. And every string that came from elsewhere (the investigation's subjects, logs, diffs,
program source, the traces) is scrubbed before anything is rendered: the value of every
environment variable whose *name* says it holds a credential (`..._TOKEN`, `..._SECRET...`,
`..._PASSWORD`, `..._KEY`, ...) is replaced wherever it occurs, and well-known credential
shapes (GitHub, AWS and Slack tokens, private keys, `password=...`, URLs with a user:password
part, `Authorization: Bearer ...`) are replaced even when the value is not in this process's
environment. A value is never scrubbed merely because it appears in the environment: paths
such as HOME, GITHUB_WORKSPACE or PYENV_DIR are ordinary text of a report (and the prefix of
the files it writes). A final check (`find_leaks`) reads back every file of the bundle.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"

# The only environment variables a bundle records: the ones that change what the compiler or
# the measurement does (torch-spyre's SENCORES, thread counts, torch's debug/log switches).
ENV_ALLOWLIST = (
    "SENCORES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "TORCH_COMPILE_DEBUG",
    "SPYRE_SIM_DEBUG_DIR",
    "TORCH_LOGS",
    "TORCHDYNAMO_VERBOSE",
    "PYTHONHASHSEED",
)
# Names that say "this is a credential": their values are scrubbed from 4 characters up
# (shorter ones would match ordinary text by chance and protect nothing). `DB_PWD` is a
# password; the shell's own PWD and OLDPWD are directories, and a report run from /tmp must
# not refuse itself because "/tmp" appears in it.
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE|CREDENTIAL|AUTH|COOKIE|"
    r"SESSION|SIGNATURE|(^|_)KEY($|_)|_PWD$|(^|_)PAT$", re.IGNORECASE)
_MIN_SECRET = 4

_KEYWORD = (r"[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passphrase|api[_-]?key|"
            r"access[_-]?key|private[_-]?key|credentials?|auth)")
_PATTERNS = (
    # -----BEGIN ... PRIVATE KEY----- blocks
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)",
                re.DOTALL), REDACTED),
    # GitHub (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), Slack, AWS access key ids
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9_]{6,}|github_pat_[A-Za-z0-9_]{10,})"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{8,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), REDACTED),
    # scheme://user:password@host
    (re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/:@]+:[^\s/@]+@"), r"\1" + REDACTED + "@"),
    # Authorization headers
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + REDACTED),
    # NAME=value, NAME: value, "name": "value" where NAME says credential
    (re.compile(r"(?i)\b(" + _KEYWORD + r")\b(\"?\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;]+)"),
     r"\1\2" + REDACTED),
)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def allowed_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed variables that are set, scrubbed like any other text."""
    environ = os.environ if environ is None else environ
    return {name: scrub_text(environ[name], ()) for name in ENV_ALLOWLIST if name in environ}


def secret_values(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values to scrub: those of the variables whose names say they are credentials.

    Longest first, so a value containing another is replaced whole.
    """
    environ = os.environ if environ is None else environ
    values = {value.strip() for name, value in environ.items()
              if name not in ENV_ALLOWLIST and is_secret_name(name)
              and len(value.strip()) >= _MIN_SECRET}
    return tuple(sorted(values, key=lambda v: (-len(v), v)))


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value and every credential-shaped substring redacted."""
    for value in secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """A copy of a JSON-like value with every string (keys included) scrubbed."""
    secrets = tuple(secrets)
    if isinstance(value, str):
        return scrub_text(value, secrets)
    if isinstance(value, Mapping):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, secrets) for v in value]
    return value


def find_leaks(contents: Mapping[str, bytes], secrets: Iterable[str]) -> list[str]:
    """Names of the files whose bytes contain a secret value (expected: none)."""
    encoded = [s.encode() for s in secrets]
    return sorted(name for name, data in contents.items() if any(s in data for s in encoded))
