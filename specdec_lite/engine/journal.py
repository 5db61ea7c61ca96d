"""A crash-safe journal of generations in SQLite, and ``resume`` after a crash.

:func:`journaled_generate` runs :func:`specdec_lite.engine.resilient.resilient_generate` and
records, in one SQLite file (:class:`Journal`), the request (prompt tokens and settings),
the seed and the generator's starting state, then after every step the step itself and the
generator's state (``bit_generator.state``, a JSON-able dict), each step in its own
committed transaction. If the process dies (even ``kill -9``), :func:`resume` finishes every
generation the journal holds as running: it rebuilds the sequence from the prompt and the
committed tokens (the models' caches are rebuilt by re-prefilling them), restores the
generator, and decodes the rest. Because a step's draws come only from that generator, a
seeded run resumed this way gives exactly the tokens of an uninterrupted run.

The file is opened with write-ahead logging (``journal_mode=WAL``) and, by default,
``synchronous=NORMAL``: a committed step survives the process being killed at any point;
only a power loss or an OS crash can lose the last few (``synchronous="FULL"`` pays an
fsync per step to close that too). A file that is not a SQLite database, a database of
another application, or a damaged journal raises ``ValueError`` naming the path.

Models are not journaled: ``resume`` takes the same target and draft as the first run.
"""

from __future__ import annotations

import json
import numbers
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..checks import check_prompt
from ..models.ngram import check_model
from ..rules.distributions import as_generator
from .faults import generator_from_state, generator_state
from .resilient import ResilientGeneration, resilient_generate
from .trace import Step

#: Written into the file header (PRAGMA application_id): "SDLJ".
APPLICATION_ID = 0x53444C4A
SCHEMA_VERSION = 1
#: The settings a journal records (everything else, such as the verifier, is run-time only).
SETTINGS = ("k", "max_new_tokens", "temperature", "rule", "eos_id", "top_k", "top_p",
            "theta", "eps", "delta", "method", "stop", "policy")

_SCHEMA = {
    "generations": ("request_id", "prompt", "settings", "seed", "rng_state", "status",
                    "error", "created", "updated"),
    "steps": ("request_id", "idx", "proposed", "n_accepted", "emitted", "extra", "cause",
              "draft_calls", "rng_state"),
}
_CREATE = """
CREATE TABLE generations (
    request_id TEXT PRIMARY KEY,
    prompt TEXT NOT NULL,       -- JSON list of token ids
    settings TEXT NOT NULL,     -- JSON object (SETTINGS)
    seed TEXT,                  -- JSON: the int seed, or null
    rng_state TEXT NOT NULL,    -- JSON: the generator's state before the first step
    status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed')),
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE steps (
    request_id TEXT NOT NULL REFERENCES generations (request_id),
    idx INTEGER NOT NULL,
    proposed TEXT NOT NULL,     -- JSON list
    n_accepted INTEGER NOT NULL,
    emitted TEXT NOT NULL,      -- JSON list
    extra TEXT NOT NULL,
    cause TEXT,                 -- null for a speculative step, else the fallback cause
    draft_calls INTEGER NOT NULL,
    rng_state TEXT NOT NULL,    -- JSON: the generator's state after this step
    PRIMARY KEY (request_id, idx)
);
"""


@dataclass
class Entry:
    """One journaled generation as stored: the request, its status, its committed steps."""

    request_id: str
    prompt: np.ndarray  # [n_prompt]
    settings: dict
    seed: int | None
    rng_state: dict  # the state after the last committed step (or the first state)
    status: str
    error: str | None
    steps: list[Step]
    causes: list[str | None]
    draft_calls: int

    @property
    def tokens(self) -> np.ndarray:  # [n_committed]
        emitted = [t for step in self.steps for t in step.emitted]
        return np.array(emitted, dtype=np.int64)

    @property
    def done(self) -> bool:
        """Whether the committed tokens already end the generation (length or EOS)."""
        tokens, eos = self.tokens, self.settings.get("eos_id")
        return len(tokens) >= self.settings["max_new_tokens"] or (
            eos is not None and bool((tokens == eos).any()))


class Journal:
    """The journal file at ``path`` (created if missing or empty); see the module.

    One ``Journal`` object is used by one thread at a time; several processes may open the same
    file (writers wait up to ``busy_timeout_s`` for each other). Use it as a context
    manager or call :meth:`close`.
    """

    def __init__(self, path: str | Path, *, synchronous: str = "NORMAL",
                 busy_timeout_s: float = 5.0) -> None:
        self.path = Path(path)
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if self.path.is_dir():
            raise ValueError(f"journal {self.path} is a directory, not a file")
        try:
            # check_same_thread=False: a caller may hand the object from thread to thread
            # (a server accepts on one, decodes on another) as long as it serialises calls.
            self._db = sqlite3.connect(self.path, isolation_level=None,
                                       timeout=busy_timeout_s, check_same_thread=False)
        except sqlite3.Error as exc:
            raise ValueError(f"journal {self.path} cannot be opened: {exc}") from None
        try:
            self._open(synchronous)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise ValueError(f"journal {self.path} is not a usable journal database: "
                             f"{exc}") from None
        except ValueError:
            self._db.close()
            raise

    def _one(self, sql: str, *args: object) -> object:
        return self._db.execute(sql, args).fetchone()[0]

    def _exec(self, sql: str, args: tuple = ()) -> list[tuple]:
        """Run one statement (its own transaction) and return its rows; a database error
        after opening, such as a file damaged while in use, becomes a ``RuntimeError``
        naming the path."""
        try:
            return self._db.execute(sql, args).fetchall()
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as exc:
            raise RuntimeError(f"journal {self.path}: {exc}") from None

    def _open(self, synchronous: str) -> None:
        check = self._one("PRAGMA quick_check")  # reading the header: fails on a non-database
        if check != "ok":
            first = " / ".join(str(check).splitlines()[:2])
            raise ValueError(f"journal {self.path} is damaged: quick_check says {first}")
        app_id = self._one("PRAGMA application_id")
        if app_id == 0:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if self._one("SELECT count(*) FROM sqlite_master") == 0:  # new and empty
                    for statement in _CREATE.split(";"):
                        self._db.execute(statement)
                    self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            app_id = self._one("PRAGMA application_id")
        if app_id != APPLICATION_ID:
            raise ValueError(f"{self.path} is a SQLite database of another application "
                             f"(application_id {app_id}), not a specdec_lite journal")
        version = self._one("PRAGMA user_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"journal {self.path} has schema version {version}; this "
                             f"specdec_lite reads version {SCHEMA_VERSION}")
        for table, columns in _SCHEMA.items():
            found = tuple(row[1] for row in self._db.execute(f"PRAGMA table_info({table})"))
            if found != columns:
                raise ValueError(f"journal {self.path} is damaged: table {table} has "
                                 f"columns {found}, expected {columns}")
        mode = self._one("PRAGMA journal_mode = WAL")
        if mode != "wal":
            raise ValueError(f"journal {self.path} cannot use write-ahead logging ({mode})")
        self._db.execute(f"PRAGMA synchronous = {synchronous}")

    # ------------------------------------------------------------ writing

    def begin(self, request_id: str, prompt: np.ndarray, settings: dict, seed: int | None,
              rng: np.random.Generator) -> None:
        """Record a new generation as running, before its first step."""
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise ValueError(f"settings has keys a journal does not record: {unknown}")
        try:
            settings_json = json.dumps(settings)
        except TypeError as exc:
            raise TypeError(f"settings must be plain numbers and strings: {exc}") from None
        now = time.time()
        try:
            self._exec(
                "INSERT INTO generations VALUES (?, ?, ?, ?, ?, 'running', NULL, ?, ?)",
                (request_id, json.dumps([int(t) for t in prompt]), settings_json,
                 json.dumps(seed), json.dumps(generator_state(rng)), now, now))
        except sqlite3.IntegrityError:
            raise ValueError(f"request_id {request_id!r} is already in journal "
                             f"{self.path}") from None

    def record(self, request_id: str, idx: int, step: Step, cause: str | None,
               draft_calls: int, rng: np.random.Generator) -> None:
        """Commit step ``idx`` of a generation and the generator's state after it."""
        self.record_state(request_id, idx, step, cause, draft_calls, generator_state(rng))

    def record_state(self, request_id: str, idx: int, step: Step, cause: str | None,
                     draft_calls: int, rng_state: dict) -> None:
        """:meth:`record`, given the generator's state (``bit_generator.state``) itself."""
        self._exec(
            "INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (request_id, idx, json.dumps(list(step.proposed)), step.n_accepted,
             json.dumps(list(step.emitted)), step.extra, cause, draft_calls,
             json.dumps(rng_state)))

    def _set_status(self, request_id: str, status: str, error: str | None = None) -> None:
        self._exec("UPDATE generations SET status = ?, error = ?, updated = ? "
                         "WHERE request_id = ?", (status, error, time.time(), request_id))

    def finish(self, request_id: str) -> None:
        self._set_status(request_id, "finished")

    def fail(self, request_id: str, error: str) -> None:
        """Mark a generation failed (an exception, not a crash): :func:`resume` skips it."""
        self._set_status(request_id, "failed", error)

    def forget(self, request_id: str) -> None:
        """Delete a generation and its steps (one transaction), so that its request id can
        be used again: a service retrying a request that failed."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM steps WHERE request_id = ?", (request_id,))
            self._db.execute("DELETE FROM generations WHERE request_id = ?", (request_id,))
            if self._one("SELECT count(*) FROM sqlite_master WHERE name = 'resumes'"):
                self._db.execute("DELETE FROM resumes WHERE request_id = ?", (request_id,))
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise RuntimeError(f"journal {self.path}: {exc}") from None

    def count_resume(self, request_id: str) -> int:
        """Count one more resume of the running generation ``request_id`` and return how
        many it has had, this one included. Kept in a side table (``resumes``, created on
        first use), so journals without it stay readable by every version."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("CREATE TABLE IF NOT EXISTS resumes (request_id TEXT PRIMARY KEY, "
                             "n INTEGER NOT NULL)")
            self._db.execute("INSERT INTO resumes VALUES (?, 1) ON CONFLICT (request_id) "
                             "DO UPDATE SET n = n + 1", (request_id,))
            n = self._one("SELECT n FROM resumes WHERE request_id = ?", request_id)
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise RuntimeError(f"journal {self.path}: {exc}") from None
        return int(n)

    def prune(self, older_than: float | None = None, keep: int | None = None) -> int:
        """Delete ended generations (finished or failed, never running ones) last updated
        before the time ``older_than`` (``time.time()`` seconds), and all but the newest
        ``keep`` ended ones; then ``VACUUM`` to give the space back. Returns how many were
        deleted."""
        doomed = set()
        if older_than is not None:
            doomed |= {r[0] for r in self._exec(
                "SELECT request_id FROM generations WHERE status != 'running' AND updated < ?",
                (older_than,))}
        if keep is not None:
            doomed |= {r[0] for r in self._exec(
                "SELECT request_id FROM generations WHERE status != 'running' "
                "ORDER BY updated DESC, request_id LIMIT -1 OFFSET ?", (max(keep, 0),))}
        for request_id in sorted(doomed):
            self.forget(request_id)
        if doomed:
            self._exec("VACUUM")
        return len(doomed)

    # ------------------------------------------------------------ reading

    def unfinished(self) -> list[str]:
        """The request ids of the generations still marked running, oldest first."""
        rows = self._exec("SELECT request_id FROM generations WHERE status = 'running' "
                          "ORDER BY created, request_id")
        return [row[0] for row in rows]

    def load(self, request_id: str) -> Entry:
        """One generation as stored (``KeyError`` if the journal does not have it)."""
        rows = self._exec("SELECT prompt, settings, seed, rng_state, status, error "
                          "FROM generations WHERE request_id = ?", (request_id,))
        if not rows:
            raise KeyError(request_id)
        row = rows[0]
        try:
            prompt, settings, seed, state = (json.loads(v) for v in row[:4])
            steps, causes, draft_calls = [], [], 0
            for proposed, n_acc, emitted, extra, cause, calls, after in self._exec(
                    "SELECT proposed, n_accepted, emitted, extra, cause, draft_calls, rng_state "
                    "FROM steps WHERE request_id = ? ORDER BY idx", (request_id,)):
                steps.append(Step(tuple(json.loads(proposed)), n_acc,
                                  tuple(json.loads(emitted)), extra))
                causes.append(cause)
                draft_calls += calls
                state = json.loads(after)
            prompt = np.array(prompt, dtype=np.int64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"journal {self.path} is damaged: request {request_id!r} "
                             f"cannot be read ({exc})") from None
        return Entry(request_id, prompt, settings, seed, state, row[4], row[5], steps,
                     causes, draft_calls)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _recorder(journal: Journal, request_id: str, first_idx: int, on_step):
    """An ``on_step`` hook that commits each new step, then calls the caller's hook."""
    seen = {"draft_calls": 0}

    def hook(gen: ResilientGeneration, rng: np.random.Generator) -> None:
        calls = gen.n_draft_calls - seen["draft_calls"]
        seen["draft_calls"] = gen.n_draft_calls
        journal.record(request_id, first_idx + len(gen.steps) - 1, gen.steps[-1],
                       gen.causes[-1], calls, rng)
        if on_step is not None:
            on_step(gen, rng)

    return hook


def _run(journal: Journal, entry: Entry, target: object, draft: object, rng, runtime: dict,
         on_step) -> ResilientGeneration:
    """Decode the rest of ``entry`` (from its committed tokens) and mark it finished."""
    done = entry.tokens  # [n_committed]
    settings = dict(entry.settings)
    settings["max_new_tokens"] -= len(done)
    if entry.done:
        settings["max_new_tokens"] = 0
    try:
        rest = resilient_generate(
            target, draft, np.concatenate([entry.prompt, done]), seed=rng,
            request_id=entry.request_id,
            on_step=_recorder(journal, entry.request_id, len(entry.steps), on_step),
            **settings, **runtime)
    except Exception as exc:
        journal.fail(entry.request_id, f"{type(exc).__name__}: {exc}")
        raise
    journal.finish(entry.request_id)
    rest.prompt = entry.prompt
    rest.tokens = np.concatenate([done, rest.tokens])
    rest.steps = entry.steps + rest.steps
    rest.causes = entry.causes + rest.causes
    rest.n_target_calls += len(entry.steps)  # one counted target call per step
    rest.n_draft_calls += entry.draft_calls
    return rest


def journaled_generate(journal: Journal, target: object, draft: object, prompt: np.ndarray,
                       *, seed: int | np.random.Generator | None = None,
                       request_id: str | None = None, on_step=None, verifier=None,
                       time_budget_s: float | None = None, breaker=None, sink=None,
                       **settings: object) -> ResilientGeneration:
    """:func:`~specdec_lite.engine.resilient.resilient_generate`, recorded in ``journal``.

    ``settings`` are the decoding settings the journal keeps (:data:`SETTINGS`: ``k``,
    ``max_new_tokens``, ``temperature``, ...); ``verifier``, ``time_budget_s``, ``breaker``
    and ``sink`` are run-time only. The generation is recorded as running before the first
    step, each step is committed as it ends, and the generation is marked finished at the
    end (or failed, with the error, if an exception ends it; :func:`resume` does not retry
    those). ``request_id`` defaults to a fresh hex id.
    """
    if not isinstance(journal, Journal):
        raise TypeError(f"journal must be a Journal, got {type(journal).__name__}")
    request_id = uuid.uuid4().hex if request_id is None else request_id
    if not isinstance(request_id, str):
        raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")
    if "max_new_tokens" not in settings or "k" not in settings:
        raise TypeError("journaled_generate needs the settings k and max_new_tokens")
    rng = as_generator(seed)
    prompt = check_prompt(prompt, check_model(target, "target"))
    seed = int(seed) if isinstance(seed, numbers.Integral) else None  # a Generator: its state
    journal.begin(request_id, prompt, settings, seed, rng)
    entry = journal.load(request_id)
    runtime = {"verifier": verifier, "time_budget_s": time_budget_s, "breaker": breaker,
               "sink": sink}
    return _run(journal, entry, target, draft, rng, runtime, on_step)


def resume(journal: Journal, target: object, draft: object, *, on_step=None, verifier=None,
           time_budget_s: float | None = None, breaker=None,
           sink=None) -> dict[str, ResilientGeneration]:
    """Finish every generation ``journal`` holds as running; their results by request id.

    Each continues from its committed tokens and generator state with the settings it was
    started with, so a seeded run that was killed ends with exactly the tokens it would
    have had. The returned generations cover the whole run: the journaled steps, then the
    new ones (``wall_time_s`` counts only the resumed part).
    """
    if not isinstance(journal, Journal):
        raise TypeError(f"journal must be a Journal, got {type(journal).__name__}")
    runtime = {"verifier": verifier, "time_budget_s": time_budget_s, "breaker": breaker,
               "sink": sink}
    results = {}
    for request_id in journal.unfinished():
        entry = journal.load(request_id)
        rng = generator_from_state(entry.rng_state)
        results[request_id] = _run(journal, entry, target, draft, rng, runtime, on_step)
    return results
