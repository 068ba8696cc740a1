"""The one module that runs git: history order, rev resolution, commit metadata.

Refs come from the command line, so they are untrusted: a ref that starts with "-" could be
read as an option, so it is refused, and every call passes `--end-of-options` before revisions.
git runs from an argument list, never a shell. Failures become `SpyreRegressError` naming
the problem and the fix.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from regressions.errors import SpyreRegressError


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    date: datetime  # committer date, UTC


def check_ref(ref: str) -> str:
    """Return `ref` if it can only be read as a revision, else raise SpyreRegressError."""
    if not ref or ref.startswith("-") or any(c in ref for c in "\0\n\r"):
        raise SpyreRegressError(
            f"invalid git ref {ref!r}: a ref must be non-empty, must not start with '-' "
            "and must be on one line; pass a branch, tag or commit hash"
        )
    return ref


def check_repository(repo: Path | str) -> Path:
    """`repo` if it is a directory inside a git work tree; else SpyreRegressError naming the
    fix (checked before anything slow runs)."""
    repo = Path(repo)
    fix = "pass --repo pointing at a git clone of the benchmarked project"
    if not repo.exists():
        raise SpyreRegressError(f"{repo} does not exist; {fix}")
    if not repo.is_dir():
        raise SpyreRegressError(f"{repo} is not a directory; {fix}")
    try:
        done = subprocess.run(["git", "-C", str(repo), "rev-parse", "--is-inside-work-tree"],
                              capture_output=True, check=False,
                              env={**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"})
    except FileNotFoundError:
        raise SpyreRegressError("git is not installed or not on PATH; install git") from None
    if done.returncode != 0 or done.stdout.strip() != b"true":
        raise SpyreRegressError(f"{repo} is not a git repository; {fix}")
    return repo


def resolve(repo: Path | str, ref: str) -> str:
    """Full sha of the commit `ref` names in `repo`."""
    return _git(repo, "rev-parse", "--verify", "--end-of-options",
                f"{check_ref(ref)}^{{commit}}", what=f"resolve {ref!r}").strip()


def first_parent_history(
    repo: Path | str, head: str = "HEAD", base: str | None = None
) -> list[str]:
    """Full shas on the first-parent chain of `head`, oldest first, after `base` if given.

    First-parent order is the order commits landed on the branch (asv find and asv publish
    walk it too); commit dates can disagree with it after rebases or clock skew.
    """
    revs = [check_ref(head)] + ([f"^{check_ref(base)}"] if base is not None else [])
    out = _git(repo, "rev-list", "--first-parent", "--reverse", "--end-of-options", *revs,
               "--", what=f"list the history of {head!r}")
    return out.split()


def commit_info(repo: Path | str, ref: str) -> Commit:
    """Sha, subject line and committer date of `ref`."""
    out = _git(repo, "log", "-1", "--format=%H%x00%ct%x00%s", "--end-of-options",
               f"{check_ref(ref)}^{{commit}}", "--", what=f"read commit {ref!r}")
    sha, timestamp, subject = out.rstrip("\n").split("\0", 2)
    return Commit(sha, subject, datetime.fromtimestamp(int(timestamp), tz=UTC))


def export_tree(repo: Path | str, ref: str, target: Path | str) -> Path:
    """Write the tracked files of commit `ref` to `target` (created if missing).

    A clean tree to run that commit's code from, without touching the user's checkout:
    `git archive`, unpacked with tarfile's "data" filter, which refuses absolute paths, links
    leaving `target` and device files.
    """
    target = Path(target)
    archive = _run(repo, "archive", "--format=tar", "--end-of-options",
                   f"{check_ref(ref)}^{{commit}}", what=f"export the tree of {ref!r}")
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def _git(repo: Path | str, *args: str, what: str) -> str:
    return _run(repo, *args, what=what).decode()


def _run(repo: Path | str, *args: str, what: str, env: dict[str, str] | None = None) -> bytes:
    repo = Path(repo)
    if not repo.is_dir():
        raise SpyreRegressError(f"cannot {what}: {repo} is not a directory; pass --repo "
                                "pointing at a checkout of the benchmarked project")
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, check=False,
            env={**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", **(env or {})},
        )
    except FileNotFoundError:
        raise SpyreRegressError("git is not installed or not on PATH; install git") from None
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip()
        detail = stderr.splitlines()[-1] if stderr else "no output"
        raise SpyreRegressError(
            f"cannot {what} in {repo}: git says: {detail}; check that {repo} is a clone of "
            "the benchmarked project with full history (not shallow) and the ref exists"
        )
    return done.stdout


# --- building histories (the demo and the end-to-end tests) ----------------------------------

_IDENTITY = {"GIT_AUTHOR_NAME": "spyre-regress demo", "GIT_AUTHOR_EMAIL": "demo@example.invalid",
             "GIT_COMMITTER_NAME": "spyre-regress demo",
             "GIT_COMMITTER_EMAIL": "demo@example.invalid"}


def init_repository(path: Path | str) -> Path:
    """A fresh repository on branch main."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    _run(path, "init", "--quiet", "--initial-branch=main", what="create a repository")
    return path


def commit_all(repo: Path | str, subject: str, timestamp: int) -> str:
    """Stage every change and commit it with a fixed date; the new commit's sha."""
    _run(repo, "add", "--all", what="stage changes")
    date = f"@{int(timestamp)} +0000"
    env = {**_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    _run(repo, "commit", "--quiet", "--allow-empty", "-m", subject,
         what=f"commit {subject!r}", env=env)
    return resolve(repo, "HEAD")


def abbreviated(name: str) -> str:
    """How output names a point of history: a commit's hash by its first 8 digits; any other
    name (a table of results without commits names its points by their dates) whole."""
    is_hash = len(name) >= 12 and all(c in "0123456789abcdef" for c in name.lower())
    return name[:8] if is_hash else name
