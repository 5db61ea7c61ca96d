"""The crash-safe journal: a generation killed with SIGKILL mid-run, resumed here, ends with
exactly the tokens of an uninterrupted run; a bad file gives a clear error."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import alarm_after

from specdec_lite.engine.decode import speculative_generate
from specdec_lite.engine.journal import Journal, journaled_generate, resume
from specdec_lite.teaching.exactness import small_pair
from specdec_lite.teaching.example import gpt_pair, prompt_ids

CHILD = Path(__file__).with_name("journal_child.py")
MAX_NEW = 150


@pytest.fixture(autouse=True)
def time_limit():
    undo = alarm_after(120)
    yield
    undo()


@pytest.fixture(scope="module")
def gpt():
    tokenizer, target, draft = gpt_pair()
    return target, draft, prompt_ids(tokenizer)


def kill_mid_run(path, request_id, temperature, seed, after_steps=5):
    """Start journal_child.py and SIGKILL it once it has committed ``after_steps`` steps."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(CHILD), str(path), request_id,
                             str(temperature), str(seed), str(MAX_NEW)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in proc.stdout:
            if line.strip() == "done" or int(line) >= after_steps:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
        stderr = proc.stderr.read()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, stderr


@pytest.mark.slow
def test_kill_9_then_resume_gives_the_uninterrupted_tokens(gpt, tmp_path):
    target, draft, prompt = gpt
    path = tmp_path / "journal.sqlite3"
    runs = {"greedy": (0.0, 0), "sampled": (1.0, 1234)}  # request id: (temperature, seed)
    for request_id, (temperature, seed) in runs.items():
        kill_mid_run(path, request_id, temperature, seed)
    want = {request_id: speculative_generate(target, draft, prompt, k=4, max_new_tokens=MAX_NEW,
                                             temperature=temperature, seed=seed)
            for request_id, (temperature, seed) in runs.items()}
    with Journal(path) as journal:
        assert journal.unfinished() == ["greedy", "sampled"]
        for request_id in runs:
            entry = journal.load(request_id)
            assert entry.status == "running"
            assert 5 <= len(entry.steps) < len(want[request_id].steps)  # killed mid-run
            assert entry.steps == want[request_id].steps[: len(entry.steps)]
        resumed = resume(journal, target, draft)
        assert journal.unfinished() == []
        for request_id in runs:
            got = resumed[request_id]
            assert got.tokens.tolist() == want[request_id].tokens.tolist()
            assert got.steps == want[request_id].steps
            assert got.n_target_calls == want[request_id].n_target_calls
            assert got.n_draft_calls == want[request_id].n_draft_calls
            assert got.prompt.tolist() == prompt.tolist()
            entry = journal.load(request_id)
            assert entry.status == "finished" and entry.tokens.tolist() == got.tokens.tolist()


def test_every_step_is_committed_as_it_ends(tmp_path):
    target, draft, prompt = small_pair()
    path = tmp_path / "j.sqlite3"
    seen = []

    def on_step(gen, rng):  # read back through a second connection, as a new process would
        with Journal(path) as other:
            entry = other.load("r")
            seen.append(len(entry.steps) == len(gen.steps)
                        and entry.tokens.tolist() == gen.tokens.tolist()
                        and entry.rng_state == rng.bit_generator.state)

    with Journal(path) as journal:
        gen = journaled_generate(journal, target, draft, prompt, seed=7, request_id="r", k=2,
                                 max_new_tokens=12, on_step=on_step)
        assert journal.load("r").status == "finished" and resume(journal, target, draft) == {}
    assert seen and all(seen) and len(seen) == len(gen.steps)
    want = speculative_generate(target, draft, prompt, k=2, max_new_tokens=12, seed=7)
    assert gen.tokens.tolist() == want.tokens.tolist()
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()


def test_resume_from_any_step_matches(tmp_path):
    """Cut the journal back to each step in turn (as a kill there would leave it)."""
    target, draft, prompt = small_pair()
    path = tmp_path / "j.sqlite3"
    with Journal(path) as journal:
        full = journaled_generate(journal, target, draft, prompt, seed=3, request_id="r", k=3,
                                  max_new_tokens=20, temperature=0.8)
    for keep in range(len(full.steps) + 1):
        raw = sqlite3.connect(path)
        with raw:
            raw.execute("DELETE FROM steps WHERE idx >= ?", (keep,))
            raw.execute("UPDATE generations SET status = 'running'")
        raw.close()
        with Journal(path) as journal:
            got = resume(journal, target, draft)["r"]
        assert got.tokens.tolist() == full.tokens.tolist(), keep
        assert got.steps == full.steps


def test_a_finished_by_eos_generation_is_not_extended(tmp_path):
    target, draft, prompt = small_pair()
    path = tmp_path / "j.sqlite3"
    with Journal(path) as journal:
        gen = journaled_generate(journal, target, draft, prompt, seed=0, request_id="r", k=2,
                                 max_new_tokens=50, eos_id=2)
        assert gen.tokens[-1] == 2 and len(gen.tokens) < 50
    raw = sqlite3.connect(path)
    with raw:  # as if killed after the last step's commit, before the status was set
        raw.execute("UPDATE generations SET status = 'running'")
    raw.close()
    with Journal(path) as journal:
        again = resume(journal, target, draft)["r"]
    assert again.tokens.tolist() == gen.tokens.tolist() and again.steps == gen.steps


def test_a_failed_generation_is_recorded_and_not_resumed(tmp_path):
    target, draft, prompt = small_pair()

    def explode(gen, rng):
        raise KeyError("boom")

    with Journal(tmp_path / "j.sqlite3") as journal:
        with pytest.raises(KeyError):
            journaled_generate(journal, target, draft, prompt, seed=0, request_id="r", k=2,
                               max_new_tokens=5, on_step=explode)
        entry = journal.load("r")
        assert entry.status == "failed" and "boom" in entry.error and len(entry.steps) == 1
        assert resume(journal, target, draft) == {}
        with pytest.raises(ValueError, match="already"):
            journaled_generate(journal, target, draft, prompt, seed=0, request_id="r", k=2,
                               max_new_tokens=5)


def test_bad_settings_are_refused(tmp_path):
    target, draft, prompt = small_pair()
    with Journal(tmp_path / "j.sqlite3") as journal:
        with pytest.raises(ValueError, match="settings"):
            journaled_generate(journal, target, draft, prompt, k=2, max_new_tokens=5, foo=1)
        with pytest.raises(TypeError, match="settings"):
            journaled_generate(journal, target, draft, prompt, k=np.int64(2), max_new_tokens=5)
        with pytest.raises(TypeError, match="journal"):
            journaled_generate("j.sqlite3", target, draft, prompt, k=2, max_new_tokens=5)
        with pytest.raises(KeyError):
            journal.load("missing")


# ---------------------------------------------------------------- files that are not journals


def _real_journal(path):
    target, draft, prompt = small_pair()
    with Journal(path) as journal:
        journaled_generate(journal, target, draft, prompt, seed=0, request_id="r", k=2,
                           max_new_tokens=200)


def test_garbage_file_is_refused_naming_the_path(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"this is not a database " * 100)
    with pytest.raises(ValueError, match=str(path)):
        Journal(path)


def test_foreign_database_is_refused(tmp_path):
    path = tmp_path / "other.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (id INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(ValueError, match="another application"):
        Journal(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA application_id = 7")
    db.close()
    with pytest.raises(ValueError, match=str(path)):
        Journal(path)


def test_damaged_journal_is_refused(tmp_path):
    path = tmp_path / "j.sqlite3"
    _real_journal(path)
    size = path.stat().st_size
    assert size > 3 * 4096
    with open(path, "r+b") as f:  # scribble over every page after the header page
        for offset in range(4096 + 8, size, 4096):
            f.seek(offset)
            f.write(b"\xff" * 1000)
    with pytest.raises(ValueError, match=str(path)):
        journal = Journal(path)
        journal.load("r")  # (not reached: opening checks the file)


def test_other_schema_version_and_bad_rows_are_refused(tmp_path):
    path = tmp_path / "j.sqlite3"
    _real_journal(path)
    db = sqlite3.connect(path)
    db.execute("UPDATE steps SET emitted = 'not json' WHERE idx = 0")
    db.commit()
    db.close()
    with Journal(path) as journal, pytest.raises(ValueError, match="damaged"):
        journal.load("r")
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(ValueError, match="version 99"):
        Journal(path)


def test_a_directory_or_bad_option_is_refused(tmp_path):
    with pytest.raises(ValueError, match="directory"):
        Journal(tmp_path)
    with pytest.raises(ValueError, match="synchronous"):
        Journal(tmp_path / "j.sqlite3", synchronous="OFF")


def test_journal_round_trips_json(tmp_path):
    path = tmp_path / "j.sqlite3"
    _real_journal(path)
    db = sqlite3.connect(path)
    prompt, settings, seed = db.execute(
        "SELECT prompt, settings, seed FROM generations").fetchone()
    db.close()
    assert json.loads(prompt) == small_pair()[2]
    assert json.loads(settings) == {"k": 2, "max_new_tokens": 200}
    assert json.loads(seed) == 0
